import { execFile } from "node:child_process";
import { access, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// Packs this repository's packages with `npm pack` and installs the tarballs elsewhere, as a user
// (or a connector author) would get them from npm: what the release checks run against.

/** The repository root. */
export const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** Every package this repository publishes, by name, with its folder. */
export const publishedPackages = {
  "@onceflow/core": "packages/core",
  "@onceflow/testkit": "packages/testkit",
  "@onceflow/connector-kafka": "packages/connector-kafka",
  "@onceflow/connector-postgres": "packages/connector-postgres",
  "create-onceflow-connector": "packages/create-onceflow-connector",
} as const;

/** A published package's name. */
export type PublishedPackage = keyof typeof publishedPackages;

/** A packed package: its tarball and the files in it. */
export interface PackedPackage {
  readonly name: string;
  readonly version: string;
  /** The absolute path of the .tgz. */
  readonly tarball: string;
  /** The paths inside the tarball, relative to the package root. */
  readonly files: readonly string[];
}

/** The result of a command run to its end. */
export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment for npm and node run in another folder: this process's, without what npm and
 * vitest set for the run at the root (npm_config_*, npm_package_*, VITEST*), which would leak this
 * repository's settings into the other package's install and test run.
 */
export function cleanEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|VITEST|INIT_CWD$|NODE_OPTIONS$|TEST$|NODE_ENV$)/i.test(key)) continue;
    env[key] = value;
  }
  return { ...env, npm_config_update_notifier: "false", ...extra };
}

/** Runs a command to its end (never rejects for a non-zero exit: the caller asserts on `code`). */
export function run(
  command: string,
  args: readonly string[],
  cwd: string,
  options: { env?: NodeJS.ProcessEnv; timeout?: number } = {},
): Promise<CommandResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      command,
      args,
      {
        cwd,
        env: options.env ?? cleanEnvironment(),
        timeout: options.timeout ?? 300_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== "number") {
          reject(
            new Error(`${command} ${args.join(" ")} in ${cwd} did not run: ${error.message}\n${stderr}`),
          );
          return;
        }
        resolvePromise({ code: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}

/** Fails with the command's output when it did not exit 0. */
export function expectSuccess(result: CommandResult, what: string): CommandResult {
  if (result.code !== 0) {
    throw new Error(
      `${what} failed (exit ${result.code}):\n--- stdout\n${result.stdout.slice(-6000)}\n--- stderr\n${result.stderr.slice(-6000)}`,
    );
  }
  return result;
}

/**
 * `npm pack`s the packages into `destination` from their built `dist/` (run `npm run build` first;
 * `npm test` does). Fails with what to run when a package has not been built.
 */
export async function packWorkspaces(
  names: readonly PublishedPackage[],
  destination: string,
): Promise<Map<string, PackedPackage>> {
  for (const name of names) await expectBuilt(name);
  const result = expectSuccess(
    await run(
      "npm",
      ["pack", "--json", "--pack-destination", destination, ...names.flatMap((name) => ["-w", name])],
      repositoryRoot,
    ),
    `npm pack ${names.join(" ")}`,
  );
  const packed = JSON.parse(result.stdout) as Array<{
    name: string;
    version: string;
    filename: string;
    files: Array<{ path: string }>;
  }>;
  return new Map(
    packed.map((each) => [
      each.name,
      {
        name: each.name,
        version: each.version,
        tarball: join(destination, each.filename),
        files: each.files.map((file) => file.path),
      },
    ]),
  );
}

/** Every file the package.json points to (main, types, exports, bin) is there: the package is built. */
async function expectBuilt(name: PublishedPackage): Promise<void> {
  const folder = join(repositoryRoot, publishedPackages[name]);
  const json = JSON.parse(await readFile(join(folder, "package.json"), "utf8")) as Record<string, unknown>;
  const targets = new Set<string>();
  const collect = (value: unknown): void => {
    if (typeof value === "string" && value.startsWith("./")) targets.add(value);
    else if (typeof value === "object" && value !== null) Object.values(value).forEach(collect);
  };
  for (const field of ["main", "module", "types", "exports", "bin"]) collect(json[field]);
  for (const target of targets) {
    await access(join(folder, target)).catch(() => {
      throw new Error(
        `${name}: ${target} is missing (not built, or a build is running): run \`npm run build\` at the repository root first`,
      );
    });
  }
}

/**
 * Points the package.json in `folder` at the tarballs: every dependency on a packed package
 * becomes `file:<tarball>`, and `overrides` make every transitive copy the tarball too (so the
 * testkit's peer dependency on core resolves to the same tarball, not to npm).
 */
export async function useTarballs(folder: string, packed: ReadonlyMap<string, PackedPackage>): Promise<void> {
  const file = join(folder, "package.json");
  const json = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
  for (const field of ["dependencies", "devDependencies"]) {
    const dependencies = json[field] as Record<string, string> | undefined;
    if (dependencies === undefined) continue;
    for (const name of Object.keys(dependencies)) {
      const tarball = packed.get(name)?.tarball;
      if (tarball !== undefined) dependencies[name] = `file:${tarball}`;
    }
  }
  json.overrides = Object.fromEntries(
    [...packed.values()].map((each) => [each.name, `file:${each.tarball}`]),
  );
  await writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
}

/**
 * Writes the package.json of a fresh private app in `folder` that depends on the tarballs of
 * `dependencies`, with overrides so that every copy of a packed package in the tree is the tarball
 * (the peer dependencies on @onceflow/core included). `npmInstall` it next.
 */
export async function writeTarballApp(
  folder: string,
  packed: ReadonlyMap<string, PackedPackage>,
  dependencies: readonly string[],
): Promise<void> {
  const tarballOf = (name: string): string => {
    const tarball = packed.get(name)?.tarball;
    if (tarball === undefined) throw new Error(`${name} was not packed`);
    return `file:${tarball}`;
  };
  const manifest = {
    name: "app",
    private: true,
    dependencies: Object.fromEntries(dependencies.map((name) => [name, tarballOf(name)])),
    overrides: Object.fromEntries([...packed.keys()].map((name) => [name, tarballOf(name)])),
  };
  await writeFile(join(folder, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

/**
 * `npm install` in `folder`, from the npm cache where it can (`--prefer-offline`; the registry is
 * asked only for what the cache lacks), without audit and funding requests.
 */
export async function npmInstall(folder: string): Promise<CommandResult> {
  return expectSuccess(
    await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline"], folder),
    `npm install in ${folder}`,
  );
}
