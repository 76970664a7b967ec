import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { filesystem, readCommittedFiles } from "@onceflow/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CrashPhase, CrashRecord } from "./fixtures/file-sink-job.js";

// Kills a real process (SIGKILL) at each phase of FileSink's two-phase commit, restarts it, and
// checks that every input is in the committed files exactly once.

const here = dirname(fileURLToPath(import.meta.url));
const repositoryRoot = resolve(here, "../..");
const fixture = join(here, "fixtures", "file-sink-job.ts");
const recordCount = 4000;
const jobId = "file-sink-crash";

interface CrashPoint {
  phase: CrashPhase;
  checkpointId: number;
  subtaskIndex: number;
}

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let workDirectory: string;
let outputDirectory: string;
let checkpointDirectory: string;

beforeEach(async () => {
  workDirectory = await mkdtemp(join(tmpdir(), "onceflow-crash-"));
  outputDirectory = join(workDirectory, "out");
  checkpointDirectory = join(workDirectory, "checkpoints");
});

afterEach(async () => {
  await rm(workDirectory, { recursive: true, force: true });
});

function startFixture(phase: CrashPhase | undefined): Run {
  const child = spawn(process.execPath, ["--import", "tsx", fixture], {
    cwd: repositoryRoot,
    env: {
      ...process.env,
      CRASH_OUTPUT_DIR: outputDirectory,
      CRASH_CHECKPOINT_DIR: checkpointDirectory,
      CRASH_RECORD_COUNT: String(recordCount),
      CRASH_AT_CHECKPOINT: "3",
      CRASH_PARALLELISM: "2",
      ...(phase === undefined ? {} : { CRASH_PHASE: phase }),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on("exit", (code, signal) => resolveExit({ code, signal }));
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Resolves with the crash point once the fixture printed it; rejects if the fixture exits first. */
function crashPointOf(run: Run): Promise<CrashPoint> {
  return new Promise((resolvePoint, reject) => {
    const look = (): boolean => {
      const line = run.stdout().match(/^CRASH-POINT (.*)$/m);
      if (line?.[1] === undefined) return false;
      resolvePoint(JSON.parse(line[1]) as CrashPoint);
      return true;
    };
    if (look()) return;
    run.child.stdout?.on("data", () => look());
    void run.exited.then(({ code, signal }) => {
      if (!look()) {
        reject(
          new Error(
            `fixture exited (${code ?? signal}) before its crash point:\n${run.stdout()}\n${run.stderr()}`,
          ),
        );
      }
    });
  });
}

async function killAt(phase: CrashPhase): Promise<CrashPoint> {
  const run = startFixture(phase);
  const point = await crashPointOf(run);
  run.child.kill("SIGKILL");
  const { signal } = await run.exited;
  expect(signal).toBe("SIGKILL");
  return point;
}

async function runToCompletion(): Promise<{ restoredCheckpointId: number | undefined }> {
  const run = startFixture(undefined);
  const { code } = await run.exited;
  if (code !== 0) throw new Error(`restarted fixture failed with ${code}:\n${run.stdout()}\n${run.stderr()}`);
  const line = run.stdout().match(/^RESULT (.*)$/m)?.[1];
  if (line === undefined) throw new Error(`restarted fixture printed no result:\n${run.stdout()}`);
  return JSON.parse(line) as { restoredCheckpointId: number | undefined };
}

async function storedCheckpointIds(): Promise<number[]> {
  return (await filesystem(checkpointDirectory).list(jobId)).map((metadata) => metadata.checkpointId);
}

async function stagingFiles(): Promise<string[]> {
  return readdir(join(outputDirectory, ".staging")).catch(() => []);
}

async function committedFileOf(point: CrashPoint): Promise<boolean> {
  const names = await readdir(outputDirectory);
  return names.some((name) => name.startsWith(`part-${point.subtaskIndex}-${point.checkpointId}-`));
}

async function expectEveryRecordExactlyOnce(): Promise<void> {
  const records = await readCommittedFiles<CrashRecord>(outputDirectory);
  const ids = records.map((record) => record.id).sort((a, b) => a - b);
  const duplicates = ids.filter((id, index) => index > 0 && ids[index - 1] === id);
  expect(duplicates).toEqual([]);
  expect(ids).toEqual(Array.from({ length: recordCount }, (_, id) => id));
  expect(await stagingFiles()).toEqual([]);
}

describe("FileSink survives SIGKILL at every phase of the two-phase commit", { timeout: 120_000 }, () => {
  it("runs to completion without a crash, publishing every record once", async () => {
    const result = await runToCompletion();
    expect(result.restoredCheckpointId).toBeUndefined();
    await expectEveryRecordExactlyOnce();
  });

  it("killed during invoke: the torn staging file is deleted and its records are replayed", async () => {
    const point = await killAt("invoke");
    expect(await stagingFiles()).not.toEqual([]); // the open transaction had reached the disk
    const committed = await readCommittedFiles<CrashRecord>(outputDirectory);
    expect(committed.length).toBeLessThan(recordCount);
    const result = await runToCompletion();
    expect(result.restoredCheckpointId).toBeGreaterThanOrEqual(point.checkpointId - 2);
    await expectEveryRecordExactlyOnce();
  });

  it("killed after pre-commit, before the checkpoint is stored: the staged file is dropped", async () => {
    const point = await killAt("after-pre-commit");
    expect(Math.max(0, ...(await storedCheckpointIds()))).toBeLessThan(point.checkpointId);
    expect(await committedFileOf(point)).toBe(false);
    const result = await runToCompletion();
    expect(result.restoredCheckpointId ?? 0).toBeLessThan(point.checkpointId);
    await expectEveryRecordExactlyOnce();
  });

  it("killed after the checkpoint is stored, before the commit: recovery commits the staged file", async () => {
    const point = await killAt("before-commit");
    expect(await storedCheckpointIds()).toContain(point.checkpointId);
    expect(await committedFileOf(point)).toBe(false);
    const result = await runToCompletion();
    expect(result.restoredCheckpointId).toBeGreaterThanOrEqual(point.checkpointId);
    expect(await committedFileOf(point)).toBe(true);
    await expectEveryRecordExactlyOnce();
  });

  it("killed during the commit, after the rename: recovery's commit is idempotent", async () => {
    const point = await killAt("during-commit");
    expect(await storedCheckpointIds()).toContain(point.checkpointId);
    expect(await committedFileOf(point)).toBe(true);
    const result = await runToCompletion();
    expect(result.restoredCheckpointId).toBeGreaterThanOrEqual(point.checkpointId);
    await expectEveryRecordExactlyOnce();
  });

  it("killed after the commit: nothing is published twice", async () => {
    const point = await killAt("after-commit");
    expect(await storedCheckpointIds()).toContain(point.checkpointId);
    expect(await committedFileOf(point)).toBe(true);
    const result = await runToCompletion();
    expect(result.restoredCheckpointId).toBeGreaterThanOrEqual(point.checkpointId);
    await expectEveryRecordExactlyOnce();
  });
});
