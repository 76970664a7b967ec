import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CommandResult,
  expectSuccess,
  type PackedPackage,
  packWorkspaces,
  run,
} from "./packed-workspaces.js";

// The route to a new connector before (and besides) the npm registry, command for command as the
// generator's README gives it: pack core, testkit and the generator into one folder, run the
// generator from its tarball with `npm exec --package=…`, install the core and testkit tarballs in
// the generated connector, build it and run its tests. npm runs offline where its cache allows:
// the generator must need nothing but its own tarball, and no @onceflow package may be fetched.

let work = "";
let packed: Map<string, PackedPackage>;

/** The tarball's file name (what a user has in the folder after `npm pack`). */
function tarballOf(name: string): string {
  const tarball = packed.get(name)?.tarball;
  if (tarball === undefined) throw new Error(`${name} was not packed`);
  return basename(tarball);
}

/**
 * `npm install` offline; when the npm cache lacks a registry answer for the connector's other
 * development dependencies (a cache filled by `npm ci` holds tarballs, not every package's
 * metadata), once more preferring the cache. The @onceflow packages come from the tarballs either way.
 */
async function npmInstallOffline(args: readonly string[], folder: string): Promise<CommandResult> {
  const offline = await run("npm", ["install", "--offline", "--no-audit", "--no-fund", ...args], folder);
  if (offline.code === 0 || !/ENOTCACHED/.test(offline.stderr)) return offline;
  return run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", ...args], folder);
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "onceflow-tarball-route-"));
  packed = await packWorkspaces(["@onceflow/core", "@onceflow/testkit", "create-onceflow-connector"], work);
}, 300_000);

afterAll(async () => {
  if (work !== "") await rm(work, { recursive: true, force: true });
});

describe("the tarball route to a new connector", () => {
  it("npm exec runs the packed generator offline, and the connector installs the packed core and testkit, builds and passes its tests", async () => {
    const version = packed.get("@onceflow/core")?.version;
    // The generator needs nothing but its own tarball: offline, whatever the npm cache holds.
    const created = expectSuccess(
      await run(
        "npm",
        [
          "exec",
          "--offline",
          "--yes",
          `--package=./${tarballOf("create-onceflow-connector")}`,
          "--",
          "create-onceflow-connector",
          "onceflow-connector-acme",
          "--kind",
          "custom",
          "--yes",
        ],
        work,
      ),
      "npm exec --package=<generator tarball> -- create-onceflow-connector",
    );
    expect(created.stdout).toContain("Wrote onceflow-connector-acme");
    const folder = join(work, "onceflow-connector-acme");
    const generated = JSON.parse(await readFile(join(folder, "package.json"), "utf8"));
    expect(generated.peerDependencies).toEqual({ "@onceflow/core": `^${version}` });

    expectSuccess(
      await npmInstallOffline(
        ["--save-dev", `../${tarballOf("@onceflow/core")}`, `../${tarballOf("@onceflow/testkit")}`],
        folder,
      ),
      "npm install --save-dev <core and testkit tarballs>",
    );
    const installed = JSON.parse(await readFile(join(folder, "package.json"), "utf8"));
    expect(installed.devDependencies["@onceflow/core"]).toBe(`file:../${tarballOf("@onceflow/core")}`);
    expect(installed.devDependencies["@onceflow/testkit"]).toBe(`file:../${tarballOf("@onceflow/testkit")}`);
    // The peer dependency stays the published range: what users of the connector will install.
    expect(installed.peerDependencies).toEqual({ "@onceflow/core": `^${version}` });
    const lock = JSON.parse(await readFile(join(folder, "package-lock.json"), "utf8"));
    for (const name of ["@onceflow/core", "@onceflow/testkit"]) {
      const resolved: unknown = lock.packages[`node_modules/${name}`]?.resolved;
      expect(resolved, `${name} in package-lock.json`).toBe(`file:../${tarballOf(name)}`);
    }

    expectSuccess(await run("npm", ["run", "build"], folder), "npm run build");
    expectSuccess(
      await run(
        "npm",
        ["test", "--", "--reporter=default", "--reporter=json", "--outputFile=vitest.json"],
        folder,
      ),
      "npm test",
    );
    const results = JSON.parse(await readFile(join(folder, "vitest.json"), "utf8"));
    expect(results).toMatchObject({ success: true, numFailedTests: 0, numPendingTests: 0, numTodoTests: 0 });
    expect(results.numPassedTests).toBeGreaterThanOrEqual(27);
  }, 300_000);
});
