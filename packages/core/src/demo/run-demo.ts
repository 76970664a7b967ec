import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { OnceflowError } from "../errors/onceflow-error.js";
import { readCommittedFiles } from "../sink/file-sink.js";
import { type DemoWindowCount, demoReading } from "./demo-pipeline.js";

/**
 * Settings of the exactly-once demo (`onceflow demo`).
 *
 * @example
 * ```ts
 * const options: DemoOptions = { seed: 42, kills: 5, records: 200_000, print: (line) => console.log(line) };
 * ```
 */
export interface DemoOptions {
  /** Seed of the random kill points, so a run can be repeated (default 1). */
  readonly seed?: number;
  /** How many times the demo kills the job with SIGKILL while it runs (default 5). */
  readonly kills?: number;
  /** How many input records (default 200,000). */
  readonly records?: number;
  /** Input rate of the generator, records per second (default: the input spread over 5 s + 2 s per kill). */
  readonly recordsPerSecond?: number;
  /** Where the demo writes its progress, one line per call (the CLI passes stdout). */
  readonly print?: (line: string) => void;
  /** Keep the work folder (checkpoints and output) instead of deleting it. */
  readonly keepDirectory?: boolean;
}

/**
 * What the demo measured.
 *
 * @example
 * ```ts
 * const report = await runDemo({ kills: 5 });
 * report.duplicates === 0 && report.missing === 0;
 * ```
 */
export interface DemoReport {
  readonly seed: number;
  readonly records: number;
  readonly checkpoints: number;
  readonly kills: number;
  readonly recoveries: number;
  /** Per restart: milliseconds from SIGKILL to the new process restoring its checkpoint. */
  readonly recoveryMs: readonly number[];
  /** Window counts written more than once. */
  readonly duplicates: number;
  /** Window counts never written. */
  readonly missing: number;
  /** Window counts written once but with a wrong value. */
  readonly wrong: number;
  readonly directory: string;
}

interface WorkerEvent {
  readonly msg: string;
  readonly at: number;
  readonly checkpointId?: number;
}

/**
 * Runs the demo: a job (generator → keyed one-second tumbling count → exactly-once files,
 * checkpoints every second) in a child process, killed with SIGKILL at seeded random moments and
 * restarted from its checkpoint each time, then run to the end; the committed files are compared
 * with counts computed directly from the input. Rejects when the output is not exactly once.
 *
 * @example
 * ```ts
 * const report = await runDemo({ seed: 7, kills: 5, print: (line) => console.log(line) });
 * ```
 */
export async function runDemo(options: DemoOptions = {}): Promise<DemoReport> {
  const seed = options.seed ?? 1;
  const kills = options.kills ?? 5;
  const records = options.records ?? 200_000;
  // Spread the input over enough time for every kill to land before the end (about 2 s per kill).
  const rate = options.recordsPerSecond ?? Math.max(100, Math.round(records / (5 + 2 * kills)));
  const print = options.print ?? (() => {});
  const random = mulberry32(seed);
  const directory = await mkdtemp(join(tmpdir(), "onceflow-demo-"));
  const worker = fileURLToPath(new URL("./demo-worker.js", import.meta.url));
  print(`onceflow demo: ${records.toLocaleString("en")} readings → count per sensor per second → files`);
  print(
    `  seed ${seed}, ${kills} SIGKILLs, ${rate.toLocaleString("en")} readings/s, checkpoints every second, work folder ${directory}`,
  );

  const recoveryMs: number[] = [];
  let checkpoints = 0;
  let killsDone = 0;
  let killedAt: number | undefined;
  for (let run = 1; ; run++) {
    const child = spawn(
      process.execPath,
      [worker, "--directory", directory, "--records", String(records), "--rate", String(rate)],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let firstCheckpoint: () => void = () => {};
    const checkpointed = new Promise<void>((resolve) => {
      firstCheckpoint = resolve;
    });
    const exited = readEvents(child, (event) => {
      if (event.msg === "checkpoint completed") {
        checkpoints++;
        firstCheckpoint();
      }
      if (event.msg === "restoring checkpoint" && killedAt !== undefined) {
        recoveryMs.push(event.at - killedAt);
        print(
          `  run ${run}: restored checkpoint ${event.checkpointId} ${event.at - killedAt} ms after the kill`,
        );
        killedAt = undefined;
      }
    });
    if (killsDone >= kills) {
      const code = await exited;
      if (code !== 0) throw new OnceflowError("JOB_FAILED", `the demo job exited with code ${code}`);
      print(`  run ${run}: ran to the end of its input`);
      break;
    }
    // Most kills land somewhere in the checkpoint cycle after the run made progress; some land
    // early, while the new process is still restoring.
    const early = random() < 0.2;
    const delay = early ? 100 + Math.floor(random() * 600) : Math.floor(random() * 1200);
    const ended = await Promise.race([
      (early ? sleep(delay) : checkpointed.then(() => sleep(delay))).then(() => false),
      exited.then(() => true),
    ]);
    if (ended) {
      print(`  run ${run}: the job finished before its kill; ${killsDone} of ${kills} kills done`);
      break;
    }
    child.kill("SIGKILL");
    killedAt = Date.now();
    killsDone++;
    await exited;
    print(
      `  run ${run}: SIGKILL ${early ? `${delay} ms after start` : `${delay} ms after its first checkpoint`} (kill ${killsDone} of ${kills}, ${checkpoints} checkpoints so far)`,
    );
  }

  const report = await checkDemoOutput(directory, records, {
    seed,
    checkpoints,
    kills: killsDone,
    recoveries: recoveryMs.length,
    recoveryMs,
  });
  printReport(report, print);
  if (!options.keepDirectory) await rm(directory, { recursive: true, force: true });
  if (report.kills < kills) {
    throw new OnceflowError(
      "JOB_FAILED",
      `the job ended after ${report.kills} of ${kills} kills; give it more input (--records) or a lower --rate`,
    );
  }
  if (report.duplicates + report.missing + report.wrong > 0) {
    throw new OnceflowError("JOB_FAILED", "the demo's output is not exactly once (see the report above)");
  }
  return report;
}

/** Compares the committed output in `directory` with counts computed from the input. */
export async function checkDemoOutput(
  directory: string,
  records: number,
  facts: Pick<DemoReport, "seed" | "checkpoints" | "kills" | "recoveries" | "recoveryMs">,
): Promise<DemoReport> {
  const expected = new Map<string, number>();
  for (let index = 0; index < records; index++) {
    const reading = demoReading(index);
    const window = `${reading.key}@${reading.timestamp - (reading.timestamp % 1000)}`;
    expected.set(window, (expected.get(window) ?? 0) + 1);
  }
  const written = await readCommittedFiles<DemoWindowCount>(join(directory, "output"));
  const seen = new Map<string, number>();
  let duplicates = 0;
  let wrong = 0;
  for (const line of written) {
    const window = `${line.key}@${line.windowStart}`;
    if (seen.has(window)) duplicates++;
    else if (expected.get(window) !== line.count) wrong++;
    seen.set(window, line.count);
  }
  const missing = [...expected.keys()].filter((window) => !seen.has(window)).length;
  return { ...facts, records, duplicates, missing, wrong, directory };
}

function printReport(report: DemoReport, print: (line: string) => void): void {
  const sorted = [...report.recoveryMs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  print("");
  print("report");
  print(`  records        ${report.records.toLocaleString("en")}`);
  print(`  checkpoints    ${report.checkpoints}`);
  print(`  kills          ${report.kills}`);
  print(`  recoveries     ${report.recoveries}`);
  print(
    `  time to recover ${median === undefined ? "-" : `median ${median} ms, max ${sorted.at(-1)} ms`} (SIGKILL → checkpoint restored in a new process)`,
  );
  print(`  duplicates     ${report.duplicates}`);
  print(`  missing        ${report.missing}`);
  print(`  wrong counts   ${report.wrong}`);
  print(
    report.duplicates + report.missing + report.wrong === 0 ? "exactly once: OK" : "exactly once: FAILED",
  );
}

// Resolves with the exit code once the process ended; calls `onEvent` for each JSON line.
function readEvents(child: ChildProcess, onEvent: (event: WorkerEvent) => void): Promise<number | null> {
  const lines = createInterface({ input: child.stdout! });
  lines.on("line", (line) => {
    try {
      onEvent(JSON.parse(line) as WorkerEvent);
    } catch {
      // Not an event line; ignore.
    }
  });
  return new Promise((resolve) => child.on("close", (code) => resolve(code)));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A small seeded PRNG, so a seed replays the same kill points. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}
