import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { checkpointDirectoryName, filesystem } from "../checkpoint/filesystem-checkpoint-storage.js";
import { createTestCheckpoint } from "../checkpoint/testing/test-checkpoints.js";
import type { DemoOptions } from "../demo/run-demo.js";
import { type CliOptions, runCli } from "./program.js";

const here = dirname(fileURLToPath(import.meta.url));
const packageJson = JSON.parse(await readFile(join(here, "..", "..", "package.json"), "utf8")) as {
  version: string;
};

const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(cwd: string, args: string[], options: Omit<CliOptions, "io"> = {}): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const io = { stdout: (text: string) => (stdout += text), stderr: (text: string) => (stderr += text), cwd };
  const code = await runCli(args, { ...options, io });
  return { code, stdout, stderr };
}

let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "onceflow-cli-"));
  roots.push(cwd);
});

/** Writes real checkpoints with FileSystemCheckpointStorage under `<cwd>/checkpoints`. */
async function writeCheckpoints(): Promise<string> {
  const storage = filesystem(join(cwd, "checkpoints"));
  await storage.store(
    createTestCheckpoint({
      jobId: "orders",
      checkpointId: 1,
      states: ["a".repeat(100), "b".repeat(2000)],
      summary: {
        operators: ["kafka-source", "count", "file-sink"],
        splits: { "orders-0": "10", "orders-1": "7" },
      },
    }),
  );
  await storage.store(
    createTestCheckpoint({
      jobId: "orders",
      checkpointId: 2,
      states: ["a".repeat(120), "b".repeat(2100)],
      isFinal: true,
      summary: {
        operators: ["kafka-source", "count", "file-sink"],
        splits: { "orders-0": "15", "orders-1": "9" },
      },
    }),
  );
  await storage.store(
    createTestCheckpoint({
      jobId: "payments",
      checkpointId: 5,
      scope: "subtask-0-of-2",
      states: ["p"],
      parallelism: 2,
    }),
  );
  return "checkpoints";
}

describe("onceflow", () => {
  it("prints its version", async () => {
    const run = await cli(cwd, ["--version"]);
    expect(run).toEqual({ code: 0, stdout: `${packageJson.version}\n`, stderr: "" });
  });

  it("reports unknown commands and options as `error [CONFIGURATION]` with exit code 1", async () => {
    const unknownCommand = await cli(cwd, ["chekpoints"]);
    expect(unknownCommand.code).toBe(1);
    expect(unknownCommand.stderr).toMatch(/^error \[CONFIGURATION\]: unknown command 'chekpoints'/);
    const unknownOption = await cli(cwd, ["checkpoints", "list", "x", "--nope"]);
    expect(unknownOption.code).toBe(1);
    expect(unknownOption.stderr).toMatch(/^error \[CONFIGURATION\]: unknown option '--nope'/);
    const excess = await cli(cwd, ["checkpoints", "list", "a", "b"]);
    expect(excess.code).toBe(1);
  });

  it("prints help with exit code 0", async () => {
    const run = await cli(cwd, ["--help"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("checkpoints");
    expect(run.stdout).toContain("run [options] <module>");
  });
});

describe("onceflow checkpoints list", () => {
  it("shows every job's completed checkpoints as a table", async () => {
    const dir = await writeCheckpoints();
    const run = await cli(cwd, ["checkpoints", "list", dir]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^JOB\s+SCOPE\s+ID\s+COMPLETED AT\s+PARALLELISM\s+SIZE\s+FINAL$/);
    expect(lines.slice(1).map((line) => line.split(/\s{2,}/))).toEqual([
      ["orders", "all", "1", "2023-11-14T22:13:21.500Z", "2", "2.1 KiB", "no"],
      ["orders", "all", "2", "2023-11-14T22:13:22.500Z", "2", "2.2 KiB", "yes"],
      ["payments", "subtask-0-of-2", "5", "2023-11-14T22:13:25.500Z", "2", "1 B", "no"],
    ]);
  });

  it("filters by job, prints JSON, and leaves out partial checkpoints", async () => {
    const dir = await writeCheckpoints();
    await mkdir(join(cwd, dir, "orders", "all", ".tmp-chk-3-abcdef"));
    const run = await cli(cwd, ["checkpoints", "list", dir, "--job", "orders", "--json"]);
    expect(run.code).toBe(0);
    const listed = JSON.parse(run.stdout) as { jobId: string; checkpointId: number }[];
    expect(listed.map((m) => `${m.jobId}/${m.checkpointId}`)).toEqual(["orders/1", "orders/2"]);
  });

  it("shows the checkpoint history kept past retention: discarded checkpoints, failures with their reason, restores", async () => {
    const dir = await writeCheckpoints();
    const storage = filesystem(join(cwd, dir));
    const base = { jobId: "orders", scope: "all", incarnation: 1, parallelism: 2, lineage: 0 };
    await storage.recordHistory(
      {
        ...base,
        kind: "completed",
        checkpointId: 1,
        triggeredAt: 1_700_000_001_000,
        at: 1_700_000_001_500,
        sizeBytes: 2100,
        isFinal: false,
      },
      100,
    );
    await storage.recordHistory(
      {
        ...base,
        kind: "completed",
        checkpointId: 2,
        triggeredAt: 1_700_000_002_000,
        at: 1_700_000_002_500,
        sizeBytes: 2220,
        isFinal: true,
        phases: {
          barrierMs: 2.4,
          alignmentMs: 0,
          snapshotMs: 0.3,
          preCommitMs: 180.6,
          storeMs: 310.2,
          commitMs: 12.5,
          retainMs: 4,
        },
      },
      100,
    );
    await storage.recordHistory(
      {
        jobId: "orders",
        scope: "all",
        kind: "failed",
        checkpointId: 3,
        at: 1_700_000_003_000,
        reason: "checkpoint 3: its snapshots timed out",
        definitive: true,
        incarnation: 1,
      },
      100,
    );
    await storage.recordHistory(
      {
        jobId: "orders",
        scope: "all",
        kind: "restored",
        checkpointId: 2,
        at: 1_700_000_004_000,
        lineage: 0,
        incarnation: 2,
      },
      100,
    );
    await storage.discard("orders", "all", 1);
    const run = await cli(cwd, ["checkpoints", "list", dir, "--job", "orders"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [retained, history] = run.stdout.trimEnd().split("\n\n");
    expect(
      retained
        ?.split("\n")
        .slice(1)
        .map((line) => line.split(/\s{2,}/)),
    ).toEqual([["orders", "all", "2", "2023-11-14T22:13:22.500Z", "2", "2.2 KiB", "yes"]]);
    const lines = history?.split("\n") ?? [];
    expect(lines[0]).toBe("checkpoint history (kept past retention, oldest first):");
    expect(lines[1]).toMatch(/^JOB\s+SCOPE\s+ID\s+AT\s+EVENT\s+DETAIL$/);
    expect(lines.slice(2).map((line) => line.split(/\s{2,}/))).toEqual([
      ["orders", "all", "1", "2023-11-14T22:13:21.500Z", "completed", "500 ms, 2.1 KiB, discarded"],
      [
        "orders",
        "all",
        "2",
        "2023-11-14T22:13:22.500Z",
        "completed",
        "500 ms (barrier 2, snapshot 0, pre-commit 181, store 310, then commit 13, retain 4), 2.2 KiB, final, retained",
      ],
      [
        "orders",
        "all",
        "3",
        "2023-11-14T22:13:23.000Z",
        "failed",
        "never restorable: checkpoint 3: its snapshots timed out",
      ],
      ["orders", "all", "2", "2023-11-14T22:13:24.000Z", "restored", "lineage 0, incarnation 2"],
    ]);
  });

  it("warns on a job id the storage does not know, naming the known ones", async () => {
    const dir = await writeCheckpoints();
    const run = await cli(cwd, ["checkpoints", "list", dir, "--job", "ordres"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(
      `warning: filesystem:${join(cwd, dir)} has no checkpoint, checkpoint history or incarnation of job "ordres": is the job id right; known jobs: orders, payments?\n`,
    );
    expect(run.stdout).toBe(`no completed checkpoints of job ordres in ${join(cwd, dir)}\n`);
  });

  it("says so when there is nothing", async () => {
    await mkdir(join(cwd, "empty"));
    const run = await cli(cwd, ["checkpoints", "list", "empty"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`no completed checkpoints in ${join(cwd, "empty")}\n`);
  });

  it("fails on a folder that does not exist, and on an unsafe job id", async () => {
    const missing = await cli(cwd, ["checkpoints", "list", "nowhere"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      `error [CONFIGURATION]: <dir>: ${join(cwd, "nowhere")} is not a folder; give the path the job passed to filesystem()\n`,
    );
    const dir = await writeCheckpoints();
    const unsafe = await cli(cwd, ["checkpoints", "list", dir, "--job", "../x"]);
    expect(unsafe.code).toBe(1);
    expect(unsafe.stderr).toMatch(/^error \[CONFIGURATION\]: jobId: /);
  });
});

describe("onceflow checkpoints inspect", () => {
  it("shows the latest checkpoint of the job, verified", async () => {
    const dir = await writeCheckpoints();
    const run = await cli(cwd, ["checkpoints", "inspect", dir, "--job", "orders"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("checkpoint 2 of job orders (scope all)");
    expect(run.stdout).toContain(
      `path:          ${join(cwd, dir, "orders", "all", checkpointDirectoryName(2))}`,
    );
    expect(run.stdout).toContain("final:         yes");
    expect(run.stdout).toContain("verification:  ok");
    expect(run.stdout).toMatch(/\n\s+1\s+2\.1 KiB\s+[0-9a-f]{16}\s+ok\n/);
    expect(run.stdout).toContain('"orders-0": "15"');
    expect(run.stdout).toContain('"kafka-source"');
  });

  it("shows a named checkpoint as JSON with its verification", async () => {
    const dir = await writeCheckpoints();
    const run = await cli(cwd, ["checkpoints", "inspect", dir, "1", "--job", "orders", "--json"]);
    expect(run.code).toBe(0);
    const [report, ...others] = JSON.parse(run.stdout) as {
      metadata: { checkpointId: number; summary: { splits: Record<string, string> } };
      verification: { ok: boolean; subtasks: { subtaskIndex: number; ok: boolean; actualBytes: number }[] };
    }[];
    expect(others).toEqual([]);
    expect(report?.metadata.checkpointId).toBe(1);
    expect(report?.metadata.summary.splits).toEqual({ "orders-0": "10", "orders-1": "7" });
    expect(report?.verification.ok).toBe(true);
    expect(report?.verification.subtasks.map((s) => s.actualBytes)).toEqual([100, 2000]);
  });

  it("picks the only job by itself and asks for --job when there are several", async () => {
    const storage = filesystem(join(cwd, "single"));
    await storage.store(createTestCheckpoint({ jobId: "alone", checkpointId: 3 }));
    const single = await cli(cwd, ["checkpoints", "inspect", "single"]);
    expect(single.code).toBe(0);
    expect(single.stdout).toContain("checkpoint 3 of job alone");

    const dir = await writeCheckpoints();
    const several = await cli(cwd, ["checkpoints", "inspect", dir]);
    expect(several.code).toBe(1);
    expect(several.stderr).toMatch(
      /^error \[CONFIGURATION\]: --job: .* holds several jobs \(orders, payments\)/,
    );
  });

  it("reports a damaged state file and exits 1 with CHECKPOINT_CORRUPT", async () => {
    const dir = await writeCheckpoints();
    const file = join(cwd, dir, "orders", "all", checkpointDirectoryName(2), "subtask-1.state");
    await writeFile(file, "c".repeat(2100));
    const run = await cli(cwd, ["checkpoints", "inspect", dir, "--job", "orders"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("verification:  DAMAGED");
    expect(run.stdout).toMatch(/\n\s+0\s+120 B\s+[0-9a-f]{16}\s+ok\n/);
    expect(run.stdout).toMatch(/DAMAGED: the state file of subtask 1 fails its SHA-256 check/);
    expect(run.stderr).toMatch(/^error \[CHECKPOINT_CORRUPT\]: checkpoint 2 of job orders is damaged/);
  });

  it("reports a checkpoint folder with truncated metadata as corrupt when asked for by id", async () => {
    const dir = await writeCheckpoints();
    await truncate(join(cwd, dir, "orders", "all", checkpointDirectoryName(2), "_metadata.json"), 30);
    const latest = await cli(cwd, ["checkpoints", "inspect", dir, "--job", "orders"]);
    expect(latest.code).toBe(0);
    expect(latest.stdout).toContain("checkpoint 1 of job orders");
    const named = await cli(cwd, ["checkpoints", "inspect", dir, "2", "--job", "orders"]);
    expect(named.code).toBe(1);
    expect(named.stderr).toMatch(
      /^error \[CHECKPOINT_CORRUPT\]: checkpoint 2 of job orders \(scope all\): its metadata/,
    );
  });

  it("fails with CHECKPOINT_NOT_FOUND or CONFIGURATION for a bad id", async () => {
    const dir = await writeCheckpoints();
    const missing = await cli(cwd, ["checkpoints", "inspect", dir, "9", "--job", "orders"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error \[CHECKPOINT_NOT_FOUND\]: job orders has no checkpoint 9/);
    const otherScope = await cli(cwd, [
      "checkpoints",
      "inspect",
      dir,
      "--job",
      "orders",
      "--scope",
      "subtask-9-of-10",
    ]);
    expect(otherScope.code).toBe(1);
    expect(otherScope.stderr).toMatch(/^error \[CHECKPOINT_NOT_FOUND\]/);
    const bad = await cli(cwd, ["checkpoints", "inspect", dir, "two", "--job", "orders"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error \[CONFIGURATION\]: \[id\]: /);
  });
});

describe("onceflow run", () => {
  async function module(name: string, source: string): Promise<string> {
    await writeFile(join(cwd, name), source);
    return name;
  }

  it("runs the exported `job`", async () => {
    const path = await module(
      "job.mjs",
      "export const job = { async execute() { return { jobId: 'orders', records: 3 }; } };\n",
    );
    const run = await cli(cwd, ["run", path]);
    expect(run.stderr).toBe("");
    expect(run).toMatchObject({ code: 0, stdout: 'job finished: {"jobId":"orders","records":3}\n' });
  });

  it("calls `createJob()` when there is no `job`, and the export named by --job-export", async () => {
    const path = await module(
      "factory.mjs",
      [
        "export let executed = [];",
        "export async function createJob() { return { execute: async () => { executed.push('created'); } }; }",
        "export const nightly = { execute: async () => 'nightly done' };",
      ].join("\n"),
    );
    const created = await cli(cwd, ["run", path]);
    expect(created).toMatchObject({ code: 0, stdout: "job finished\n" });
    const named = await cli(cwd, ["run", path, "--job-export", "nightly"]);
    expect(named).toMatchObject({ code: 0, stdout: 'job finished: "nightly done"\n' });
    const imported = (await import(join(cwd, path))) as { executed: string[] };
    expect(imported.executed).toEqual(["created"]);
  });

  it("turns a failing job into exit code 1 with its code", async () => {
    const path = await module(
      "failing.mjs",
      "export const job = { async execute() { throw new Error('the sink exploded'); } };\n",
    );
    const run = await cli(cwd, ["run", path]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe("error [JOB_FAILED]: the sink exploded\n");
  });

  it("explains what is wrong with the module", async () => {
    const noJob = await module("nojob.mjs", "export const something = 1;\n");
    expect((await cli(cwd, ["run", noJob])).stderr).toBe(
      'error [CONFIGURATION]: <module>: the module exports neither "job" nor "createJob" (it exports something); name the export with --job-export\n',
    );
    expect((await cli(cwd, ["run", noJob, "--job-export", "other"])).stderr).toMatch(
      /^error \[CONFIGURATION\]: --job-export: the module has no export "other"/,
    );
    expect((await cli(cwd, ["run", noJob, "--job-export", "something"])).stderr).toMatch(
      /^error \[CONFIGURATION\]: --job-export: export "something" is not a job/,
    );
    const missing = await cli(cwd, ["run", "missing.mjs"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      `error [CONFIGURATION]: <module>: ${join(cwd, "missing.mjs")} is not a file\n`,
    );
    const broken = await module("broken.mjs", "export const job = ;\n");
    const syntax = await cli(cwd, ["run", broken]);
    expect(syntax.code).toBe(1);
    expect(syntax.stderr).toMatch(/^error \[CONFIGURATION\]: <module>: cannot import .*broken\.mjs/);
  });
});

describe("onceflow demo", () => {
  it("passes the options to runDemo and prints its lines", async () => {
    const calls: DemoOptions[] = [];
    const runDemo = async (options: DemoOptions): Promise<void> => {
      calls.push(options);
      options.print?.("every record exactly once");
    };
    const run = await cli(cwd, ["demo", "--seed", "7", "--kills", "3", "--records", "1000"], { runDemo });
    expect(run).toEqual({ code: 0, stdout: "every record exactly once\n", stderr: "" });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ seed: 7, kills: 3, records: 1000 });

    await cli(cwd, ["demo"], { runDemo });
    expect(Object.keys(calls[1] ?? {})).toEqual(["print"]);
  });

  it("rejects a count that is not a non-negative integer", async () => {
    let called = false;
    const run = await cli(cwd, ["demo", "--kills", "-1"], {
      runDemo: async () => {
        called = true;
      },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error \[CONFIGURATION\]: option '--kills <n>' argument '-1' is invalid/);
    expect(called).toBe(false);
  });
});

describe("the onceflow executable", () => {
  const main = join(here, "main.ts");
  const exec = promisify(execFile);
  // Resolved from this repository: the child runs in a temporary folder without node_modules.
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

  it("exits 0 with the version, and 1 with `error [CODE]: message`", async () => {
    const version = await exec(process.execPath, ["--import", tsx, main, "--version"], { cwd });
    expect(version.stdout).toBe(`${packageJson.version}\n`);
    const failed = await exec(process.execPath, ["--import", tsx, main, "checkpoints", "list", "nowhere"], {
      cwd,
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(/^error \[CONFIGURATION\]: <dir>: .*nowhere is not a folder/);
  }, 30_000);
});
