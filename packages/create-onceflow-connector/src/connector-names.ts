import { ConfigurationError } from "@onceflow/core";

/**
 * Names derived from the npm package name of a new connector.
 *
 * @example
 * ```ts
 * connectorNames("@acme/onceflow-connector-ledger");
 * // { packageName: "@acme/onceflow-connector-ledger", directory: "onceflow-connector-ledger",
 * //   sinkClass: "LedgerSink", sinkFile: "ledger-sink" }
 * ```
 */
export interface ConnectorNames {
  /** The npm package name, as given. */
  readonly packageName: string;
  /** The default folder to write it to: the name without its scope. */
  readonly directory: string;
  /** The sink's class name (PascalCase, ends in `Sink`). */
  readonly sinkClass: string;
  /** The sink's file name without extension (kebab-case, ends in `-sink`). */
  readonly sinkFile: string;
}

// npm's rules for new package names: lowercase, URL-safe, at most 214 characters, an optional scope.
const packageNamePattern = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

/**
 * Checks a package name against npm's rules for new packages and derives the folder, class and
 * file names from it: the unscoped name without `onceflow-`/`connector-` prefixes (and a
 * `-connector` suffix) gives the sink's name. Throws a `ConfigurationError` (code `CONFIGURATION`)
 * naming the rule broken.
 *
 * @example
 * ```ts
 * connectorNames("onceflow-connector-acme-ledger").sinkClass; // "AcmeLedgerSink"
 * ```
 */
export function connectorNames(packageName: string): ConnectorNames {
  if (packageName.length === 0 || packageName.length > 214 || !packageNamePattern.test(packageName)) {
    throw new ConfigurationError(
      "name",
      `'${packageName}' is not a valid npm package name: use lowercase letters, digits, '-', '.', '_' or '~', at most 214 characters, optionally with a scope ('@acme/onceflow-connector-ledger')`,
    );
  }
  const unscoped = packageName.replace(/^@[^/]+\//, "");
  let base = unscoped.replace(/[._~]+/g, "-");
  base = base.replace(/^onceflow(?:-|$)/, "").replace(/^(?:connector|sink)(?:-|$)/, "");
  base = base.replace(/-(?:connector|sink)$/, "");
  const words = base.split("-").filter((word) => word.length > 0);
  if (words.length === 0) words.push("custom");
  // A class name cannot start with a digit.
  if (/^[0-9]/.test(words[0] ?? "")) words.unshift("connector");
  return {
    packageName,
    directory: unscoped,
    sinkClass: `${words.map((word) => word.charAt(0).toUpperCase() + word.slice(1)).join("")}Sink`,
    sinkFile: `${words.join("-")}-sink`,
  };
}
