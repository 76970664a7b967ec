import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

// SIGKILLs a real `onceflow run --threads` process running a keyed running count (a keyBy exchange
// between the subtask threads, the main thread coordinating their checkpoints) at phases of a
// checkpoint and at random moments, restarts it — at another parallelism too — and reads the
// committed files back with a reader of its own: for every key, the counts committed are exactly
// 1, 2, …, n (n its records in the input), each once. A record lost, counted twice, or a key's
// state restored in the wrong subtask would show as a count missing or repeated.

const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "packages/core/dist/cli.js");
const core = pathToFileURL(join(root, "packages/core/dist/index.js")).href;

const COUNT = 6000;
const KEYS = 13;

type Phase = "after-pre-commit" | "before-commit" | "during-commit";

const jobModule = `import { FileSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(core)};
const phase = process.env.CRASH_PHASE;
const crashAt = Number(process.env.CRASH_AT_CHECKPOINT ?? "0");
let crashing = false;
async function crashPoint(reached, checkpointId, subtaskIndex) {
  if (!crashing) {
    crashing = true;
    process.stdout.write("CRASH-POINT " + JSON.stringify({ phase: reached, checkpointId, subtaskIndex }) + "\\n");
  }
  // Held here until the test kills the process.
  await new Promise((resolve) => setTimeout(resolve, 600_000));
}
class CrashingFileSink extends FileSink {
  async preCommit(transaction, checkpoint) {
    await super.preCommit(transaction, checkpoint);
    if (phase === "after-pre-commit" && checkpoint.checkpointId >= crashAt && transaction.byteLength > 0)
      await crashPoint(phase, checkpoint.checkpointId, this.runtimeContext.subtaskIndex);
  }
  async commit(transaction) {
    const checkpointId = this.pendingTransactions().find((pending) => pending.transaction === transaction)?.checkpointId;
    const due = checkpointId !== undefined && checkpointId >= crashAt && transaction.byteLength > 0;
    if (phase === "before-commit" && due) await crashPoint(phase, checkpointId, this.runtimeContext.subtaskIndex);
    await super.commit(transaction);
    if (phase === "during-commit" && due) await crashPoint(phase, checkpointId, this.runtimeContext.subtaskIndex);
  }
}
class CountPerKey {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(record, context, out) {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect({ key: context.getCurrentKey(), count, id: record.id });
  }
}
export function createJob(launch) {
  const job = new Job({
    jobId: "keyed-threads-crash",
    parallelism: Number(process.env.CRASH_PARALLELISM),
    checkpointing: { interval: 100, storage: filesystem("checkpoints") },
    restartStrategy: { type: "none" },
    ...launch,
  });
  job
    .fromSource(
      new GeneratorSource({ count: ${COUNT}, splits: 4, recordsPerSecond: 2000, batchSize: 20, generate: (id) => ({ id, key: "k" + (id % ${KEYS}) }) }),
      { uid: "numbers" },
    )
    .keyBy((record) => record.key)
    .process(() => new CountPerKey(), { uid: "count" })
    .sinkTo(() => new CrashingFileSink({ directory: "output" }), { uid: "out" });
  return job;
}
`;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Run {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(cwd: string, parallelism: number, env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [cli, "run", "job.mjs", "--threads"], {
    cwd,
    env: { ...process.env, CRASH_PARALLELISM: String(parallelism), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exit;
  });
  return { child, output: () => output, exit };
}

async function until(what: string, run: Run, ready: () => boolean): Promise<void> {
  for (let round = 0; !ready(); round++) {
    if (run.child.exitCode !== null) throw new Error(`the run ended before ${what}:\n${run.output()}`);
    if (round > 1200) throw new Error(`${what} never happened:\n${run.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Reads the committed output files on its own: JSON lines in the files FileSink committed. */
async function readCommitted(cwd: string): Promise<Array<{ key: string; count: number; id: number }>> {
  const directory = join(cwd, "output");
  const names = (await readdir(directory).catch(() => [] as string[])).filter(
    (name) => !name.startsWith(".") && !name.includes("inprogress") && !name.includes("pending"),
  );
  const rows: Array<{ key: string; count: number; id: number }> = [];
  for (const name of names.sort()) {
    const text = await readFile(join(directory, name), "utf8");
    for (const line of text.split("\n")) if (line.trim() !== "") rows.push(JSON.parse(line));
  }
  return rows;
}

function expectExactCounts(rows: ReadonlyArray<{ key: string; count: number; id: number }>): void {
  expect(new Set(rows.map((row) => row.id)).size).toBe(COUNT);
  expect(rows).toHaveLength(COUNT);
  const countsOf = new Map<string, number[]>();
  for (const { key, count } of rows) countsOf.set(key, [...(countsOf.get(key) ?? []), count]);
  for (let key = 0; key < KEYS; key++) {
    const records = Math.floor(COUNT / KEYS) + (key < COUNT % KEYS ? 1 : 0);
    const counts = (countsOf.get(`k${key}`) ?? []).sort((a, b) => a - b);
    expect(counts, `counts of k${key}`).toEqual(Array.from({ length: records }, (_, index) => index + 1));
  }
}

describe("onceflow run --threads with keyBy, SIGKILLed", { timeout: 300_000 }, () => {
  it.each<Phase>(["after-pre-commit", "before-commit", "during-commit"])(
    "killed %s, then at random moments at parallelism 3 and 2: every key's counts are exactly 1…n",
    async (phase) => {
      const cwd = await mkdtemp(join(tmpdir(), "onceflow-keyed-threads-crash-"));
      cleanups.push(() => rm(cwd, { recursive: true, force: true }));
      await writeFile(join(cwd, "job.mjs"), jobModule);

      const first = start(cwd, 2, { CRASH_PHASE: phase, CRASH_AT_CHECKPOINT: "4" });
      await until(`the crash point ${phase}`, first, () => first.output().includes("CRASH-POINT"));
      first.child.kill("SIGKILL");
      expect((await first.exit).signal).toBe("SIGKILL");

      for (const [parallelism, afterMs] of [
        [3, 1200],
        [2, 900],
      ] as const) {
        const run = start(cwd, parallelism);
        await until("the threads to run", run, () => /running \d subtask/.test(run.output()));
        await new Promise((resolve) => setTimeout(resolve, afterMs));
        run.child.kill("SIGKILL");
        await run.exit;
      }

      const last = start(cwd, 2);
      const exit = await last.exit;
      expect(exit.code, last.output()).toBe(0);
      expectExactCounts(await readCommitted(cwd));
    },
  );
});
