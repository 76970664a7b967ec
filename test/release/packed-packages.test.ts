import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cleanEnvironment,
  expectSuccess,
  npmInstall,
  type PackedPackage,
  type PublishedPackage,
  packWorkspaces,
  publishedPackages,
  run,
  writeTarballApp,
} from "./packed-workspaces.js";

// The release check: every published package is packed as `npm publish` would upload it, the
// tarballs are installed into a fresh folder (nothing of this repository on the way), and a small
// job — a generator into the exactly-once FileSink, checkpointed to the filesystem, then run again
// to restore its final checkpoint — runs there from an ES module (`import`) and from CommonJS
// (`require`). `npm publish --dry-run` must pass for every tarball.

const names = Object.keys(publishedPackages) as PublishedPackage[];
let work = "";
let app = "";
let packed: Map<string, PackedPackage>;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "onceflow-packed-"));
  const tarballs = join(work, "tarballs");
  await mkdir(tarballs);
  packed = await packWorkspaces(names, tarballs);
  app = join(work, "app");
  await mkdir(app);
  await writeTarballApp(app, packed, [...packed.keys()]);
  await npmInstall(app);
}, 600_000);

afterAll(async () => {
  if (work !== "") await rm(work, { recursive: true, force: true });
});

/** The job, as ESM or CommonJS: prints what it committed and what each package exports. */
function jobScript(moduleSystem: "esm" | "cjs"): string {
  const load =
    moduleSystem === "esm"
      ? `import * as core from "@onceflow/core";
import * as testkit from "@onceflow/testkit";
import * as kafka from "@onceflow/connector-kafka";
import * as postgres from "@onceflow/connector-postgres";
const [out, checkpoints] = process.argv.slice(2);
await main();`
      : `const core = require("@onceflow/core");
const testkit = require("@onceflow/testkit");
const kafka = require("@onceflow/connector-kafka");
const postgres = require("@onceflow/connector-postgres");
const [out, checkpoints] = process.argv.slice(2);
main().catch((error) => { console.error(error); process.exitCode = 1; });`;
  return `${load}

async function run() {
  const { FileSink, GeneratorSource, Job, filesystem } = core;
  const job = new Job({
    jobId: "packed-check",
    parallelism: 2,
    checkpointing: { interval: 20, storage: filesystem(checkpoints) },
  });
  job
    .fromSource(new GeneratorSource({ count: 2000, splits: 2, generate: (i) => ({ id: i }) }), { uid: "numbers" })
    .map((record) => ({ id: record.id, square: record.id * record.id }))
    .sinkTo(() => new FileSink({ directory: out }), { uid: "files" });
  return job.execute();
}

async function main() {
  const first = await run();
  // Again with the same job id: restores the final checkpoint, the source is at its end, nothing new.
  const second = await run();
  const committed = await core.readCommittedFiles(out);
  console.log(JSON.stringify({
    first: { endedBy: first.endedBy, lastCheckpointId: first.lastCheckpointId },
    second: { restoredCheckpointId: second.restoredCheckpointId },
    committed: committed.length,
    distinct: new Set(committed.map((record) => record.id)).size,
    squaresRight: committed.every((record) => record.square === record.id * record.id),
    exports: {
      core: Object.keys(core).sort(),
      testkit: Object.keys(testkit).sort(),
      kafka: Object.keys(kafka).sort(),
      postgres: Object.keys(postgres).sort(),
    },
  }));
}
`;
}

describe("the packed packages", () => {
  it.each(names)("%s: the tarball holds LICENSE, README, dist and the release fields", async (name) => {
    const each = packed.get(name);
    expect(each, `${name} was packed`).toBeDefined();
    expect(each?.files).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json"]));
    expect(each?.files.some((file) => file.startsWith("dist/"))).toBe(true);
    const license = await readFile(join(app, "node_modules", name, "LICENSE"), "utf8");
    expect(license).toContain("Apache License");
    expect(license).toContain("Version 2.0, January 2004");
    const json = JSON.parse(await readFile(join(app, "node_modules", name, "package.json"), "utf8"));
    expect(json).toMatchObject({
      license: "Apache-2.0",
      homepage: expect.stringMatching(/^https:\/\/github\.com\/onceflow\/onceflow/),
      bugs: { url: "https://github.com/onceflow/onceflow/issues" },
      repository: { url: "git+https://github.com/onceflow/onceflow.git", directory: publishedPackages[name] },
    });
  });

  it.each(["esm", "cjs"] as const)(
    "run a checkpointed generator → FileSink job from %s, and restore its checkpoint",
    async (moduleSystem) => {
      const folder = join(work, moduleSystem);
      await mkdir(folder);
      const script = join(app, moduleSystem === "esm" ? "job.mjs" : "job.cjs");
      await writeFile(script, jobScript(moduleSystem));
      const result = expectSuccess(
        await run(process.execPath, [script, join(folder, "out"), join(folder, "checkpoints")], app),
        `node ${script}`,
      );
      const report = JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "{}");
      expect(report.first.endedBy).toBe("end-of-input");
      expect(report.first.lastCheckpointId).toBeGreaterThanOrEqual(1);
      expect(report.second.restoredCheckpointId).toBe(report.first.lastCheckpointId);
      expect(report).toMatchObject({ committed: 2000, distinct: 2000, squaresRight: true });
      for (const api of ["core", "testkit", "kafka", "postgres"])
        expect(report.exports[api].length).toBeGreaterThan(0);
      expect(report.exports.core).toEqual(
        expect.arrayContaining(["Job", "TwoPhaseCommitSink", "OnceflowError"]),
      );
      await writeFile(join(work, `${moduleSystem}-exports.json`), JSON.stringify(report.exports));
    },
    120_000,
  );

  it("ESM and CommonJS see the same exports", async () => {
    const esm = await readFile(join(work, "esm-exports.json"), "utf8");
    const cjs = await readFile(join(work, "cjs-exports.json"), "utf8");
    expect(JSON.parse(cjs)).toEqual(JSON.parse(esm));
  });

  it.each([
    ["onceflow", ["--help"], /Usage: onceflow/i],
    ["onceflow-testkit", ["prepare", "--help"], /usage: onceflow-testkit prepare/],
    ["onceflow-kafka", ["--help"], /Usage: onceflow-kafka/i],
    ["onceflow-postgres", ["--help"], /Usage: onceflow-postgres/i],
    ["create-onceflow-connector", ["--help"], /usage: npm create onceflow-connector/],
  ])("the %s executable runs from the install (%j)", async (bin, args, expected) => {
    const result = expectSuccess(await run(join(app, "node_modules", ".bin", bin), args, app), `${bin}`);
    expect(result.stdout).toMatch(expected);
  });

  it.each(names)("npm publish --dry-run %s", async (name) => {
    const tarball = packed.get(name)?.tarball ?? "";
    const result = expectSuccess(
      await run("npm", ["publish", "--dry-run", tarball], work, {
        env: cleanEnvironment({ npm_config_loglevel: "notice" }),
      }),
      `npm publish --dry-run ${name}`,
    );
    const output = `${result.stdout}\n${result.stderr}`;
    expect(output).toContain(`+ ${name}@`);
    // npm would rewrite a field it finds wrong (a bin path, a repository URL) on publish: none may be.
    expect(output).not.toMatch(/auto-corrected|was invalid and removed|errors in your package\.json/i);
    expect(output).toContain("with tag latest and public access");
  });
});
