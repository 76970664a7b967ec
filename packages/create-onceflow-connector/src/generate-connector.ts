import { mkdir, readdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { ConfigurationError } from "@onceflow/core";
import type { ConnectorKind } from "./connector-kinds.js";
import { type ConnectorNames, connectorNames } from "./connector-names.js";
import { connectorPackageJson } from "./connector-package-json.js";
import { builtOnceflowVersion } from "./onceflow-version.js";
import {
  defaultTemplatesDirectory,
  readTemplateLayers,
  renderTemplate,
  type TemplateTokens,
  targetPath,
} from "./template-files.js";

/**
 * What {@link generateConnector} writes.
 *
 * @example
 * ```ts
 * const options: GenerateConnectorOptions = { packageName: "onceflow-connector-acme", kind: "custom", directory: "acme" };
 * ```
 */
export interface GenerateConnectorOptions {
  /** The npm package name of the connector. */
  readonly packageName: string;
  readonly kind: ConnectorKind;
  /** The folder to write to (created; must be absent or empty). */
  readonly directory: string;
  /** The @onceflow/* version to depend on (default: the version of `@onceflow/core` the generator was built with). */
  readonly onceflowVersion?: string;
  /** Where the templates are (default: the package's `templates/`). */
  readonly templatesDirectory?: string;
}

/**
 * What {@link generateConnector} wrote.
 *
 * @example
 * ```ts
 * const { directory, files } = await generateConnector(options);
 * ```
 */
export interface GeneratedConnector {
  /** The absolute folder of the new package. */
  readonly directory: string;
  /** The files written, relative to `directory` (with `/`), sorted. */
  readonly files: readonly string[];
  readonly names: ConnectorNames;
  readonly onceflowVersion: string;
}

/**
 * Writes a new connector package: `templates/common` and `templates/<kind>` with the names put in,
 * and its package.json. Refuses (a `ConfigurationError`, code `CONFIGURATION`) a folder that
 * already holds files, so nothing is ever overwritten.
 *
 * @example
 * ```ts
 * const written = await generateConnector({ packageName: "onceflow-connector-acme", kind: "custom", directory: "acme" });
 * written.files; // [".changeset/README.md", ".changeset/config.json", ".github/workflows/ci.yml", …, "src/acme-sink.ts", …]
 * ```
 */
export async function generateConnector(options: GenerateConnectorOptions): Promise<GeneratedConnector> {
  const names = connectorNames(options.packageName);
  const directory = resolve(options.directory);
  const onceflowVersion = options.onceflowVersion ?? builtOnceflowVersion();
  const existing = await readdir(directory).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  if (existing.length > 0) {
    throw new ConfigurationError(
      "directory",
      `${directory} is not empty (${existing.slice(0, 3).join(", ")}${existing.length > 3 ? ", …" : ""}): give a new or empty folder with --directory`,
    );
  }
  const tokens: TemplateTokens = {
    PACKAGE_NAME: names.packageName,
    SINK_CLASS: names.sinkClass,
    SINK_FILE: names.sinkFile,
    ONCEFLOW_VERSION: onceflowVersion,
  };
  const templates = await readTemplateLayers(options.templatesDirectory ?? defaultTemplatesDirectory(), [
    "common",
    options.kind,
  ]);
  const output = new Map<string, string>();
  for (const [path, text] of templates) output.set(targetPath(path, tokens), renderTemplate(text, tokens));
  const packageJson = connectorPackageJson({
    packageName: names.packageName,
    kind: options.kind,
    onceflowVersion,
  });
  output.set("package.json", `${JSON.stringify(packageJson, null, 2)}\n`);
  for (const [path, text] of output) {
    const file = join(directory, path);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text, { flag: "wx" });
  }
  return { directory, files: [...output.keys()].sort(), names, onceflowVersion };
}
