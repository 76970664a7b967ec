import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { readCommittedFiles } from "../sink/file-sink.js";
import { parseRunFlags } from "./run-flags.js";

// The built CLI (`npm run build -w @onceflow/core`), as a user runs it.
const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const core = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const COUNT = 30_000;

/** Generated indexes into a FileSink, each record saying which process and thread wrote it. */
function jobModule(
  options: { storage?: string; dieInSubtask?: number; outOfMemoryInSubtask?: number } = {},
): string {
  const storage = options.storage ?? 'filesystem("checkpoints")';
  const die =
    options.dieInSubtask === undefined
      ? ""
      : `if (launch.subtaskIndex === ${options.dieInSubtask}) setTimeout(() => { throw new Error("subtask ${options.dieInSubtask} blew up"); }, 500);`;
  // Keeps allocating until the thread's heap limit stops it.
  const outOfMemory =
    options.outOfMemoryInSubtask === undefined
      ? ""
      : `if (launch.subtaskIndex === ${options.outOfMemoryInSubtask}) setTimeout(() => { const kept = []; for (;;) kept.push(new Array(100_000).fill(kept.length)); }, 500);`;
  return `import { resourceLimits, threadId } from "node:worker_threads";
import { FileSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(core)};
export function createJob(launch) {
  ${die}
  ${outOfMemory}
  const job = new Job({
    jobId: "threads-e2e",
    parallelism: 2,
    checkpointing: { interval: 200, storage: ${storage} },
    restartStrategy: { type: "none" },
    ...launch,
  });
  job
    .fromSource(new GeneratorSource({ count: ${COUNT}, splits: 4, generate: (index) => index, recordsPerSecond: 3000 }), { uid: "numbers" })
    .map((index) => ({ index, pid: process.pid, thread: threadId, youngGeneration: resourceLimits.maxYoungGenerationSizeMb, oldGeneration: resourceLimits.maxOldGenerationSizeMb }))
    .sinkTo(new FileSink({ directory: "output" }), { uid: "out" });
  return job;
}
`;
}

interface Written {
  readonly index: number;
  readonly pid: number;
  readonly thread: number;
  /** The heap limits of the thread that wrote it, in MiB. */
  readonly youngGeneration: number;
  readonly oldGeneration: number;
}

async function workFolder(module: string): Promise<string> {
  const cwd = await mkdtemp(join(tmpdir(), "onceflow-run-threads-"));
  cleanups.push(() => rm(cwd, { recursive: true, force: true }));
  await writeFile(join(cwd, "job.mjs"), module);
  return cwd;
}

function start(
  cwd: string,
  args: string[],
): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [cli, "run", "job.mjs", ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exit;
  });
  return { child, output: () => output, exit };
}

async function eventually<T>(
  what: string,
  attempt: () => Promise<T | undefined>,
  output: () => string,
): Promise<T> {
  // Bounded by the test's timeout; each round waits a little so the job can move on.
  for (let round = 0; ; round++) {
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    if (round > 900) throw new Error(`${what} never happened; the CLI printed:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Committed records once both subtasks committed some. */
async function committedByBoth(cwd: string): Promise<Written[] | undefined> {
  const written = await readCommittedFiles<Written>(join(cwd, "output"));
  return new Set(written.map((record) => record.thread)).size === 2 ? written : undefined;
}

function expectExactlyOnce(written: readonly Written[]): void {
  const indexes = written.map((record) => record.index).sort((a, b) => a - b);
  expect(indexes.length).toBe(COUNT);
  expect(indexes).toEqual(Array.from({ length: COUNT }, (_, index) => index));
}

/** The (pid, thread) pairs that wrote, per process. */
function writersByProcess(written: readonly Written[]): Map<number, Set<number>> {
  const writers = new Map<number, Set<number>>();
  for (const { pid, thread } of written) writers.set(pid, (writers.get(pid) ?? new Set()).add(thread));
  return writers;
}

describe("onceflow run --threads: flags", () => {
  it("refuses --threads with --subtask", () => {
    expect(() => parseRunFlags({ threads: true, subtask: "1" }, {})).toThrow(
      /--threads: runs every subtask of the job, each in its own thread, and --subtask runs one: pass only one of them/,
    );
    expect(parseRunFlags({ threads: true }, {}).threads).toBe(true);
    expect(parseRunFlags({}, {}).threads).toBe(false);
  });

  it("reads each thread's heap limits, only with --threads, in whole MiB", () => {
    expect(
      parseRunFlags({ threads: true, threadMaxYoungGeneration: "12", threadMaxOldGeneration: "512" }, {})
        .threadResourceLimits,
    ).toEqual({ maxYoungGenerationSizeMb: 12, maxOldGenerationSizeMb: 512 });
    expect(parseRunFlags({ threads: true }, {}).threadResourceLimits).toEqual({});
    expect(() => parseRunFlags({ threadMaxOldGeneration: "512" }, {})).toThrow(
      /--thread-max-old-generation: limits the heap of each subtask's thread: add --threads/,
    );
    expect(() => parseRunFlags({ threads: true, threadMaxYoungGeneration: "0" }, {})).toThrow(
      /--thread-max-young-generation: must be a whole number of MiB ≥ 1, got "0"/,
    );
    expect(() => parseRunFlags({ threads: true, threadMaxOldGeneration: "1g" }, {})).toThrow(
      /--thread-max-old-generation: must be a whole number of MiB ≥ 1, got "1g"/,
    );
  });
});

describe("onceflow run --threads (built CLI, a real child process)", { timeout: 180_000 }, () => {
  it("runs both subtasks in threads of one process; SIGTERM stops with a final checkpoint; a restart resumes, exactly once", async () => {
    const cwd = await workFolder(jobModule());
    const first = start(cwd, ["--threads", "--metrics-port", "0"]);
    const base = await eventually(
      "the endpoints' address",
      async () => /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(first.output())?.[1],
      first.output,
    );
    expect(first.output()).toMatch(
      /running 2 subtask\(s\) of threads-e2e in threads \d+, \d+ of process \d+/,
    );
    // /metrics merges both threads' registries: each subtask's series, apart by their label.
    const metrics = await eventually(
      "both subtasks' checkpoints in /metrics",
      async () => {
        const text = await (await fetch(`${base}/metrics`)).text();
        const completed = [0, 1].map((subtask) =>
          Number(
            new RegExp(
              `^onceflow_last_completed_checkpoint_id\\{job="threads-e2e",subtask="${subtask}"\\} (\\d+)$`,
              "m",
            ).exec(text)?.[1] ?? 0,
          ),
        );
        return completed.every((id) => id >= 2) ? text : undefined;
      },
      first.output,
    );
    for (const subtask of [0, 1]) {
      expect(metrics).toMatch(
        new RegExp(
          `^onceflow_records_in_total\\{job="threads-e2e",subtask="${subtask}",operator="numbers"\\} [1-9]`,
          "m",
        ),
      );
    }
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const ready = await eventually(
      "/readyz 200",
      async () => {
        const response = await fetch(`${base}/readyz`);
        return response.status === 200 ? ((await response.json()) as { state: string }) : undefined;
      },
      first.output,
    );
    expect(ready.state).toBe("running");

    await eventually("committed output of both subtasks", () => committedByBoth(cwd), first.output);
    first.child.kill("SIGTERM");
    expect(await first.exit).toBe(0);
    expect(first.output()).toMatch(/job finished in 2 thread\(s\): .*"endedBy":"stop"/);
    const stopped = await readCommittedFiles<Written>(join(cwd, "output"));
    expect(stopped.length).toBeLessThan(COUNT);

    const second = start(cwd, ["--threads"]);
    expect(await second.exit).toBe(0);
    expect(second.output()).toMatch(
      /"endedBy":"end-of-input","lastCheckpointId":\d+,"restoredCheckpointId":\d+/,
    );
    const written = await readCommittedFiles<Written>(join(cwd, "output"));
    expectExactlyOnce(written);
    // Each run was one process with two threads.
    const writers = writersByProcess(written);
    expect([...writers.keys()].sort()).toEqual([first.child.pid, second.child.pid].sort());
    for (const threads of writers.values()) expect(threads.size).toBe(2);
  });

  it("keeps exactly-once when the whole process is SIGKILLed and restarted", async () => {
    const cwd = await workFolder(jobModule());
    const first = start(cwd, ["--threads"]);
    await eventually("committed output of both subtasks", () => committedByBoth(cwd), first.output);
    first.child.kill("SIGKILL");
    await first.exit;
    const second = start(cwd, ["--threads"]);
    expect(await second.exit).toBe(0);
    const written = await readCommittedFiles<Written>(join(cwd, "output"));
    expectExactlyOnce(written);
    expect(writersByProcess(written).get(second.child.pid as number)?.size).toBe(2);
    // Unless told otherwise, each thread's young generation is at most 48 MiB.
    expect(new Set(written.map((record) => record.youngGeneration))).toEqual(new Set([48]));
  });

  it("fails the run with the dead thread's error when a thread dies", async () => {
    const cwd = await workFolder(jobModule({ dieInSubtask: 1 }));
    const run = start(cwd, ["--threads"]);
    expect(await run.exit).toBe(1);
    expect(run.output()).toMatch(
      /error \[JOB_FAILED\]: the thread of subtask 1 \(thread \d+\) died: subtask 1 blew up/,
    );
  });

  it("gives each thread the heap limits asked for", async () => {
    const cwd = await workFolder(jobModule());
    const run = start(cwd, [
      "--threads",
      "--thread-max-young-generation",
      "24",
      "--thread-max-old-generation",
      "256",
    ]);
    expect(await run.exit).toBe(0);
    const written = await readCommittedFiles<Written>(join(cwd, "output"));
    expectExactlyOnce(written);
    expect(new Set(written.map((record) => `${record.youngGeneration}/${record.oldGeneration}`))).toEqual(
      new Set(["24/256"]),
    );
  });

  it("fails the run, not the process, when a thread passes its heap limit; a rerun loses nothing", async () => {
    const cwd = await workFolder(jobModule({ outOfMemoryInSubtask: 1 }));
    const run = start(cwd, ["--threads", "--thread-max-old-generation", "64"]);
    expect(await run.exit).toBe(1);
    expect(run.output()).toMatch(
      /error \[JOB_FAILED\]: the thread of subtask 1 \(thread \d+\) died: .*memory limit/,
    );
    await writeFile(join(cwd, "job.mjs"), jobModule());
    const rerun = start(cwd, ["--threads"]);
    expect(await rerun.exit).toBe(0);
    expectExactlyOnce(await readCommittedFiles<Written>(join(cwd, "output")));
  });

  it("refuses in-memory checkpoints with a CONFIGURATION error saying what to use", async () => {
    const cwd = await workFolder(jobModule({ storage: '"memory"' }));
    const run = start(cwd, ["--threads"]);
    expect(await run.exit).toBe(1);
    expect(run.output()).toMatch(
      /error \[CONFIGURATION\]: checkpointing\.storage: job threads-e2e keeps its checkpoints in memory.*filesystem\("\.\/checkpoints"\)/,
    );
  });
});
