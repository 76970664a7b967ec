import { readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The `templates/` folder shipped in the package, beside `dist/` (and beside `src/` in the repository).
 *
 * @example
 * ```ts
 * const folder = defaultTemplatesDirectory();
 * ```
 */
export function defaultTemplatesDirectory(): string {
  return fileURLToPath(new URL("../templates", import.meta.url));
}

/**
 * The values put in place of the `__TOKEN__`s of template paths and contents.
 *
 * @example
 * ```ts
 * const tokens: TemplateTokens = { PACKAGE_NAME: "onceflow-connector-acme", SINK_CLASS: "AcmeSink", SINK_FILE: "acme-sink", ONCEFLOW_VERSION: "0.1.0" };
 * ```
 */
export interface TemplateTokens {
  readonly PACKAGE_NAME: string;
  readonly SINK_CLASS: string;
  readonly SINK_FILE: string;
  readonly ONCEFLOW_VERSION: string;
}

/**
 * Replaces every `__PACKAGE_NAME__`, `__SINK_CLASS__`, `__SINK_FILE__` and `__ONCEFLOW_VERSION__`.
 * The tokens are valid identifiers, so template sources stay valid TypeScript.
 *
 * @example
 * ```ts
 * renderTemplate("class __SINK_CLASS__ {}", tokens); // "class AcmeSink {}"
 * ```
 */
export function renderTemplate(text: string, tokens: TemplateTokens): string {
  return text.replace(/__(PACKAGE_NAME|SINK_CLASS|SINK_FILE|ONCEFLOW_VERSION)__/g, (_match, token: string) =>
    String(tokens[token as keyof TemplateTokens]),
  );
}

/**
 * Where a template file goes in the new package: tokens replaced, and `_gitignore` renamed to
 * `.gitignore` (npm leaves `.gitignore` files out of published packages, so it ships under another name).
 *
 * @example
 * ```ts
 * targetPath("src/__SINK_FILE__.ts", tokens); // "src/acme-sink.ts"
 * ```
 */
export function targetPath(templatePath: string, tokens: TemplateTokens): string {
  return renderTemplate(templatePath, tokens)
    .split("/")
    .map((part) => (part === "_gitignore" ? ".gitignore" : part))
    .join("/");
}

/**
 * The files of `templates/common` and `templates/<kind>`, by their path relative to the layer
 * (with `/`), the kind's files replacing common ones of the same path.
 *
 * @example
 * ```ts
 * const files = await readTemplateLayers(defaultTemplatesDirectory(), ["common", "custom"]);
 * files.get("LICENSE"); // the Apache-2.0 text
 * ```
 */
export async function readTemplateLayers(
  templatesDirectory: string,
  layers: readonly string[],
): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const layer of layers) {
    const root = join(templatesDirectory, layer);
    for (const path of await listFiles(root)) {
      files.set(relative(root, path).split(sep).join("/"), await readFile(path, "utf8"));
    }
  }
  return files;
}

async function listFiles(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) files.push(...(await listFiles(path)));
    else if (entry.isFile()) files.push(path);
  }
  return files.sort();
}
