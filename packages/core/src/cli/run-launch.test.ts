import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliOptions, runCli } from "./program.js";
import { parseRestore, parseRunFlags, parseSubtask } from "./run-flags.js";

let cwd: string;
beforeAll(async () => {
  cwd = await mkdtemp(join(tmpdir(), "onceflow-run-launch-"));
});
afterAll(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function cli(args: string[], options: Omit<CliOptions, "io"> = {}) {
  let stdout = "";
  let stderr = "";
  const io = { stdout: (text: string) => (stdout += text), stderr: (text: string) => (stderr += text), cwd };
  const code = await runCli(args, { ...options, io });
  return { code, stdout, stderr };
}

async function module(name: string, source: string): Promise<string> {
  await writeFile(join(cwd, name), source);
  return name;
}

describe("onceflow run --subtask", () => {
  it("hands the subtask to createJob(launch), also from the StatefulSet pod name in HOSTNAME", async () => {
    const path = await module(
      "launched.mjs",
      [
        "export const launches = [];",
        "export function createJob(launch) {",
        "  launches.push(launch);",
        "  return { execute: async () => 'ok', status: () => ({ subtaskIndexes: [launch.subtaskIndex] }) };",
        "}",
      ].join("\n"),
    );
    expect(await cli(["run", path, "--subtask", "1"])).toMatchObject({ code: 0 });
    const previous = process.env.HOSTNAME;
    process.env.HOSTNAME = "orders-job-2";
    try {
      expect(await cli(["run", path, "--subtask", "from-hostname"])).toMatchObject({ code: 0 });
    } finally {
      if (previous === undefined) delete process.env.HOSTNAME;
      else process.env.HOSTNAME = previous;
    }
    const imported = (await import(join(cwd, path))) as { launches: unknown[] };
    expect(imported.launches).toEqual([{ subtaskIndex: 1 }, { subtaskIndex: 2 }]);
  });

  it("refuses a prebuilt job, and a createJob that ignores the launch", async () => {
    const prebuilt = await module("prebuilt.mjs", "export const job = { execute: async () => 'ok' };\n");
    const refused = await cli(["run", prebuilt, "--subtask", "0"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^error \[CONFIGURATION\]: --subtask: export "job" is a job already built.*createJob\(launch\)/,
    );
    const ignoring = await module(
      "ignoring.mjs",
      "export function createJob() { return { execute: async () => 'ok', status: () => ({ subtaskIndexes: [0, 1, 2] }) }; }\n",
    );
    const ignored = await cli(["run", ignoring, "--subtask", "1"]);
    expect(ignored.code).toBe(1);
    expect(ignored.stderr).toContain("returned a job that runs subtask(s) 0, 1, 2, not 1: spread launch");
  });
});

describe("onceflow run --restore", () => {
  it("hands where the job starts to createJob(launch), and refuses a prebuilt job", async () => {
    const path = await module(
      "restored.mjs",
      [
        "export const launches = [];",
        "export function createJob(launch) {",
        "  launches.push(launch);",
        "  return { execute: async () => 'ok' };",
        "}",
      ].join("\n"),
    );
    for (const setting of ["7", "none", "latest"]) {
      expect(await cli(["run", path, "--restore", setting])).toMatchObject({ code: 0 });
    }
    const imported = (await import(join(cwd, path))) as { launches: unknown[] };
    expect(imported.launches).toEqual([
      { restore: { checkpointId: 7 } },
      { restore: "none" },
      { restore: "latest" },
    ]);
    const prebuilt = await module(
      "prebuilt-restore.mjs",
      "export const job = { execute: async () => 'ok' };\n",
    );
    const refused = await cli(["run", prebuilt, "--restore", "7"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^error \[CONFIGURATION\]: --restore: export "job" is a job already built/,
    );
  });

  it("takes latest, none or a checkpoint id, and says what else it takes", () => {
    expect(parseRestore("latest")).toBe("latest");
    expect(parseRestore("none")).toBe("none");
    expect(parseRestore("12")).toEqual({ checkpointId: 12 });
    expect(() => parseRestore("0")).toThrow(/--restore.*latest, none or a checkpoint id/);
    expect(() => parseRestore("newest")).toThrow(/--restore.*latest, none or a checkpoint id/);
  });
});

describe("onceflow run --metrics-port", () => {
  it("says to install prom-client when it is missing", async () => {
    const path = await module("plain.mjs", "export const job = { execute: async () => 'ok' };\n");
    const missing = Object.assign(new Error("Cannot find package 'prom-client' imported from /x.js"), {
      code: "ERR_MODULE_NOT_FOUND",
    });
    const run = await cli(["run", path, "--metrics-port", "0"], {
      importPrometheus: () => Promise.reject(missing),
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("error [CONFIGURATION]: --metrics-port: serving metrics needs prom-client");
    expect(run.stderr).toContain("npm install prom-client");
  });

  it("attaches the registry to a prebuilt job, and refuses an object that cannot take it", async () => {
    const attached = await module(
      "attached.mjs",
      [
        "export const attached = [];",
        "export const job = {",
        "  attachMetrics: (metrics) => attached.push(typeof metrics.counter),",
        "  status: () => ({ state: 'running', checkpointInterval: undefined, subtasks: [], subtaskIndexes: [0] }),",
        "  execute: async () => 'ok',",
        "};",
      ].join("\n"),
    );
    const run = await cli(["run", attached, "--metrics-port", "0"]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toMatch(/^metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/);
    expect(((await import(join(cwd, attached))) as { attached: string[] }).attached).toEqual(["function"]);
    const bare = await module("bare.mjs", "export const job = { execute: async () => 'ok' };\n");
    const refused = await cli(["run", bare, "--metrics-port", "0"]);
    expect(refused.stderr).toMatch(
      /^error \[CONFIGURATION\]: --metrics-port: export "job" has no attachMetrics\(\)/,
    );
  });
});

describe("the flags of onceflow run", () => {
  it("parses ports, hosts and the readiness limit", () => {
    expect(parseRunFlags({ metricsPort: "9464", readyMaxCheckpointAge: "30000" }, {})).toMatchObject({
      metricsPort: 9464,
      metricsHost: "127.0.0.1",
      readyMaxCheckpointAgeMs: 30_000,
      uiPort: undefined,
    });
    expect(() => parseRunFlags({ metricsPort: "70000" }, {})).toThrow(/--metrics-port: must be a port/);
    expect(() => parseRunFlags({ metricsPort: "http" }, {})).toThrow(/--metrics-port: must be a port/);
    expect(() => parseRunFlags({ readyMaxCheckpointAge: "1000" }, {})).toThrow(/add --metrics-port/);
  });

  it("takes the subtask as a number or from the trailing -<n> of HOSTNAME", () => {
    expect(parseSubtask("3", {})).toBe(3);
    expect(parseSubtask("from-hostname", { HOSTNAME: "orders-10" })).toBe(10);
    expect(() => parseSubtask("-1", {})).toThrow(/--subtask: must be a whole number ≥ 0 or from-hostname/);
    expect(() => parseSubtask("from-hostname", { HOSTNAME: "laptop" })).toThrow(
      /from-hostname takes the subtask from the trailing -<n> of HOSTNAME .* but HOSTNAME is "laptop"/,
    );
    expect(() => parseSubtask("from-hostname", {})).toThrow(/HOSTNAME is not set/);
  });
});

describe("onceflow run --allow-non-restored-state", () => {
  it("hands allowNonRestoredState to createJob(launch), and refuses a prebuilt job", async () => {
    const path = await module(
      "allowing.mjs",
      [
        "export const launches = [];",
        "export function createJob(launch) {",
        "  launches.push(launch);",
        "  return { execute: async () => 'ok' };",
        "}",
      ].join("\n"),
    );
    expect(await cli(["run", path, "--allow-non-restored-state"])).toMatchObject({ code: 0 });
    expect(await cli(["run", path])).toMatchObject({ code: 0 });
    const imported = (await import(join(cwd, path))) as { launches: unknown[] };
    expect(imported.launches).toEqual([{ allowNonRestoredState: true }, {}]);

    const prebuilt = await module(
      "prebuilt-allowing.mjs",
      "export const job = { execute: async () => 'ok' };\n",
    );
    const refused = await cli(["run", prebuilt, "--allow-non-restored-state"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^error \[CONFIGURATION\]: --allow-non-restored-state: export "job" is a job already built.*allowNonRestoredState: true in its options, or export createJob\(launch\)/,
    );
  });
});
