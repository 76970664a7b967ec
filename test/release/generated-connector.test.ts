import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expectSuccess,
  npmInstall,
  type PackedPackage,
  packWorkspaces,
  run,
  useTarballs,
  writeTarballApp,
} from "./packed-workspaces.js";

// `npm create onceflow-connector` as an author runs it, against this repository's packed tarballs:
// the packed generator writes a connector of each kind into a temporary folder, which is installed
// against the packed @onceflow/core and @onceflow/testkit, built (ESM + CommonJS + types),
// type-checked, checked with publint and attw, and tested — its contract suite (the sink or the
// source contract, with its leak check) must pass out of the box.

let work = "";
let packed: Map<string, PackedPackage>;
let generatorCli = "";

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "onceflow-generated-"));
  const tarballs = join(work, "tarballs");
  await mkdir(tarballs);
  packed = await packWorkspaces(
    ["@onceflow/core", "@onceflow/testkit", "create-onceflow-connector"],
    tarballs,
  );
  // The generator as npm create runs it: from its own tarball, installed on its own.
  const generator = join(work, "generator");
  await mkdir(generator);
  await writeTarballApp(generator, packed, ["create-onceflow-connector"]);
  await npmInstall(generator);
  generatorCli = join(generator, "node_modules", ".bin", "create-onceflow-connector");
}, 600_000);

afterAll(async () => {
  if (work !== "") await rm(work, { recursive: true, force: true });
});

describe.each([
  {
    kind: "custom",
    name: "@acme/onceflow-connector-ledger",
    mainFile: "ledger-sink",
    implementing: "extends TwoPhaseCommitSink",
    // The two-phase-commit sink contract: 27 cases.
    contractCases: 27,
  },
  {
    kind: "redis",
    name: "onceflow-connector-redis-orders",
    mainFile: "redis-sink",
    implementing: "extends TwoPhaseCommitSink",
    contractCases: 27,
  },
  {
    kind: "source",
    name: "onceflow-connector-redis-streams",
    mainFile: "redis-streams-source",
    implementing: "implements Source<T, RedisStreamSplit>",
    // The source contract, continuous and bounded: 11 cases each.
    contractCases: 22,
  },
])("create-onceflow-connector --kind $kind", ({ kind, name, mainFile, implementing, contractCases }) => {
  it("writes a package that installs, builds, type-checks and passes its contract suite", async () => {
    const folder = join(work, kind);
    const created = expectSuccess(
      await run(generatorCli, ["--name", name, "--kind", kind, "--directory", folder, "--yes"], work),
      "create-onceflow-connector",
    );
    expect(created.stdout).toContain(`Wrote ${name}`);
    const packageJson = JSON.parse(await readFile(join(folder, "package.json"), "utf8"));
    expect(packageJson.peerDependencies).toEqual({
      "@onceflow/core": `^${packed.get("@onceflow/core")?.version}`,
    });
    expect(packageJson.keywords).toContain("onceflow-connector");
    expect(Object.keys(packageJson.exports["."].import)[0]).toBe("types");
    expect(await readFile(join(folder, `src/${mainFile}.ts`), "utf8")).toContain(implementing);

    await useTarballs(folder, packed);
    await npmInstall(folder);
    expectSuccess(await run("npm", ["run", "build"], folder), "npm run build");
    expectSuccess(await run("npm", ["run", "typecheck"], folder), "npm run typecheck");
    // publint --strict and attw: the package works for ESM and CommonJS users.
    expectSuccess(await run("npm", ["run", "lint:package"], folder), "npm run lint:package");
    expectSuccess(
      await run(
        "npm",
        ["test", "--", "--reporter=default", "--reporter=json", "--outputFile=vitest.json"],
        folder,
      ),
      "npm test",
    );
    // Every case of the contract suite ran and passed: none failed, none skipped.
    const results = JSON.parse(await readFile(join(folder, "vitest.json"), "utf8"));
    expect(results).toMatchObject({ success: true, numFailedTests: 0, numPendingTests: 0, numTodoTests: 0 });
    expect(results.numPassedTests).toBeGreaterThanOrEqual(contractCases);

    // The built package loads from both module systems.
    const esm = expectSuccess(
      await run(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `import * as m from "${name}"; console.log(Object.keys(m).sort().join(","))`,
        ],
        folder,
      ),
      "import",
    );
    const cjs = expectSuccess(
      await run(
        process.execPath,
        ["-e", `console.log(Object.keys(require("${name}")).sort().join(","))`],
        folder,
      ),
      "require",
    );
    expect(esm.stdout.trim()).not.toBe("");
    expect(cjs.stdout.trim()).toBe(esm.stdout.trim());
  }, 600_000);
});
