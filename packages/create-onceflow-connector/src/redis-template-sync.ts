import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

// The `redis` kind is the repository's examples/connector-redis: its src/ and test/ are copied into
// templates/redis/ (the example's package name becomes __PACKAGE_NAME__), so the example, which CI
// tests against a real Redis, and what the generator writes never drift. Used by
// scripts/sync-redis-template.mts and by the unit test that fails when the copy is stale; not
// part of the generator's bundle (the published package has no examples/ folder).

/**
 * The example the `redis` kind is copied from.
 *
 * @example
 * ```ts
 * const folder = redisExampleDirectory(); // <repository>/examples/connector-redis
 * ```
 */
export function redisExampleDirectory(): string {
  return fileURLToPath(new URL("../../../examples/connector-redis", import.meta.url));
}

/** The example's folders that make up the template. */
const syncedFolders = ["src", "test"] as const;

/**
 * The `redis` template as the example defines it: every file of the example's `src/` and `test/`,
 * by path relative to the example (with `/`), its package name replaced by `__PACKAGE_NAME__`.
 *
 * @example
 * ```ts
 * const files = await redisTemplateFromExample(redisExampleDirectory());
 * files.has("src/redis-sink.ts"); // true
 * ```
 */
export async function redisTemplateFromExample(exampleDirectory: string): Promise<Map<string, string>> {
  const { name } = JSON.parse(await readFile(join(exampleDirectory, "package.json"), "utf8")) as {
    name: string;
  };
  const files = await readFolders(exampleDirectory);
  for (const [path, text] of files) files.set(path, text.replaceAll(name, "__PACKAGE_NAME__"));
  return files;
}

/**
 * The `redis` template's synced files as they are in `templates/redis` now.
 *
 * @example
 * ```ts
 * const files = await currentRedisTemplate(templatesDirectory);
 * ```
 */
export function currentRedisTemplate(templatesDirectory: string): Promise<Map<string, string>> {
  return readFolders(join(templatesDirectory, "redis"));
}

/**
 * Replaces `templates/redis/src` and `templates/redis/test` with the example's.
 *
 * @example
 * ```ts
 * const written = await syncRedisTemplate(redisExampleDirectory(), templatesDirectory);
 * ```
 */
export async function syncRedisTemplate(
  exampleDirectory: string,
  templatesDirectory: string,
): Promise<string[]> {
  const files = await redisTemplateFromExample(exampleDirectory);
  const target = join(templatesDirectory, "redis");
  for (const folder of syncedFolders) await rm(join(target, folder), { recursive: true, force: true });
  for (const [path, text] of files) {
    await mkdir(dirname(join(target, path)), { recursive: true });
    await writeFile(join(target, path), text);
  }
  return [...files.keys()].sort();
}

async function readFolders(root: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const folder of syncedFolders) {
    for (const path of await listFiles(join(root, folder))) {
      files.set(relative(root, path).split(sep).join("/"), await readFile(path, "utf8"));
    }
  }
  return files;
}

async function listFiles(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) files.push(...(await listFiles(path)));
    else if (entry.isFile()) files.push(path);
  }
  return files.sort();
}
