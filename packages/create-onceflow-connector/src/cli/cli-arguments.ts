import { ConfigurationError } from "@onceflow/core";
import {
  type ConnectorKind,
  connectorKindNames,
  connectorKinds,
  isConnectorKind,
} from "../connector-kinds.js";

/**
 * The command line of `create-onceflow-connector`, parsed. Missing values are asked for (or, with
 * `--yes`, defaulted) by the caller.
 *
 * @example
 * ```ts
 * parseCliArguments(["--name", "onceflow-connector-acme", "--kind", "custom", "--yes"]);
 * // { name: "onceflow-connector-acme", kind: "custom", directory: undefined, yes: true, help: false, version: false }
 * ```
 */
export interface CliArguments {
  readonly name: string | undefined;
  readonly kind: ConnectorKind | undefined;
  readonly directory: string | undefined;
  /** Take the defaults for everything not given instead of asking. */
  readonly yes: boolean;
  readonly help: boolean;
  readonly version: boolean;
}

/**
 * The text `--help` prints.
 *
 * @example
 * ```ts
 * console.log(usage());
 * ```
 */
export function usage(): string {
  const kinds = connectorKindNames()
    .map((kind) => `  ${kind.padEnd(8)} ${connectorKinds[kind].summary}`)
    .join("\n");
  return `usage: npm create onceflow-connector [-- [name] [options]]
       create-onceflow-connector [name] [--name <package>] [--kind <kind>] [--directory <folder>] [--yes]

Writes a new onceflow connector package: a TwoPhaseCommitSink, the sink contract suite wired to a
real service through @onceflow/testkit, a dual ESM/CommonJS build (tsup), vitest, a README, the
Apache-2.0 LICENSE, changesets and a GitHub Actions workflow.

options:
  --name <package>      the npm package name, e.g. onceflow-connector-acme or @acme/onceflow-connector-x
  --kind <kind>         what the connector is (default custom):
${kinds.replace(/^/gm, "    ")}
  --directory <folder>  where to write it (default: the name without its scope); must be empty or absent
  -y, --yes             do not ask: take the defaults for what is not given
  -h, --help            print this help
  -v, --version         print the version

Without --yes, what is not given is asked for on the terminal.`;
}

const valueFlags = new Set(["--name", "--kind", "--directory"]);

/**
 * Parses the arguments after the command name: `--flag value` or `--flag=value`, and one optional
 * positional name. Throws a `ConfigurationError` (code `CONFIGURATION`) for an unknown flag, a flag
 * without its value, an unknown kind or two names.
 *
 * @example
 * ```ts
 * parseCliArguments(["onceflow-connector-acme", "--kind=redis"]).kind; // "redis"
 * ```
 */
export function parseCliArguments(argv: readonly string[]): CliArguments {
  const values = new Map<string, string>();
  const positional: string[] = [];
  let yes = false;
  let help = false;
  let version = false;
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index] as string;
    if (argument === "--yes" || argument === "-y") yes = true;
    else if (argument === "--help" || argument === "-h") help = true;
    else if (argument === "--version" || argument === "-v") version = true;
    else if (argument.startsWith("-")) {
      const equals = argument.indexOf("=");
      const flag = equals >= 0 ? argument.slice(0, equals) : argument;
      if (!valueFlags.has(flag)) {
        throw new ConfigurationError(
          flag,
          "unknown option: use --name, --kind, --directory, --yes or --help",
        );
      }
      const value = equals >= 0 ? argument.slice(equals + 1) : argv[++index];
      if (value === undefined || value.length === 0 || (equals < 0 && value.startsWith("-"))) {
        throw new ConfigurationError(flag, `needs a value (${flag} <value> or ${flag}=<value>)`);
      }
      values.set(flag, value);
    } else positional.push(argument);
  }
  if (positional.length > 1 || (positional.length === 1 && values.has("--name"))) {
    throw new ConfigurationError(
      "name",
      `give one package name, got ${[...positional, ...(values.has("--name") ? [values.get("--name")] : [])].join(", ")}`,
    );
  }
  const kind = values.get("--kind");
  return {
    name: values.get("--name") ?? positional[0],
    kind: kind === undefined ? undefined : parseConnectorKind(kind),
    directory: values.get("--directory"),
    yes,
    help,
    version,
  };
}

/**
 * `value` as a {@link ConnectorKind}, or a `ConfigurationError` (code `CONFIGURATION`) listing the kinds.
 *
 * @example
 * ```ts
 * parseConnectorKind("redis"); // "redis"
 * ```
 */
export function parseConnectorKind(value: string): ConnectorKind {
  if (isConnectorKind(value)) return value;
  const names = connectorKindNames();
  const listed = `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;
  throw new ConfigurationError("kind", `'${value}' is not a kind: use ${listed}`);
}
