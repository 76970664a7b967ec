import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readCommittedFiles } from "@onceflow/core";
import type { ChaosRecord } from "./fixtures/chaos-record.js";

// Seeded chaos for the generator → files pipeline: the job runs as a child process and is SIGKILLed
// after seeded random delays, restarted each time from its last checkpoint, then run to the end.
// An independent reader (the committed files, not the job) checks every input exactly once and the
// order of each key. The seed fixes the kill schedule and the job's settings; rerunning with it
// replays the same schedule (the interleaving inside the process still varies with timing).

const here = dirname(fileURLToPath(import.meta.url));
const repositoryRoot = resolve(here, "../..");
const fixture = join(here, "fixtures", "generator-to-files-job.ts");

/** A small, fast, seedable PRNG (mulberry32): the same seed gives the same sequence. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A fresh seed, or the one in `ONCEFLOW_CHAOS_SEED`. */
export function chaosSeed(): number {
  const given = process.env.ONCEFLOW_CHAOS_SEED;
  if (given !== undefined && given !== "") return Number(given);
  return Math.floor(Math.random() * 2 ** 31);
}

/**
 * Runs one chaos run the way the CI tests do: the seed printed with how to replay it
 * (ONCEFLOW_CHAOS_SEED), progress and the final report on stdout.
 */
export async function runSeededChaos<R>(
  run: (seed: number, log: (line: string) => void) => Promise<R>,
): Promise<R> {
  const seed = chaosSeed();
  console.log(`chaos seed ${seed} (replay: ONCEFLOW_CHAOS_SEED=${seed})`);
  const report = await run(seed, (line) => console.log(line));
  console.log(JSON.stringify(report));
  return report;
}

export interface ChaosOptions {
  readonly seed: number;
  /** SIGKILLs before the final, uninterrupted run (fewer if the input ends first: see the report). */
  readonly kills: number;
  readonly records: number;
  /** Longest delay between a start and its kill, ms (the shortest is 0: a kill during startup or recovery). */
  readonly maxKillDelayMs?: number;
  /** The generator's rate (default 500/s): the input should outlast the kills. */
  readonly recordsPerSecond?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly kills: number;
  /** Kills that landed before the job printed STARTED (during startup/recovery). */
  readonly killsDuringStartup: number;
  readonly records: number;
  readonly committed: number;
  readonly keys: number;
  readonly durationMs: number;
}

export interface Child {
  readonly process: ChildProcess;
  readonly started: Promise<void>;
  isStarted(): boolean;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** Starts a chaos job (`script`, by default the generator → files fixture) as a child process. */
export function startJob(env: Record<string, string>, script = fixture): Child {
  return watchChild(
    spawn(process.execPath, ["--import", "tsx", script], {
      cwd: repositoryRoot,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
}

/** A spawned job (or a `docker run` of one): its output collected, `STARTED` and its exit watched. */
export function watchChild(child: ChildProcess): Child {
  let out = "";
  let err = "";
  let isStarted = false;
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolveStarted) => {
    markStarted = () => {
      isStarted = true;
      resolveStarted();
    };
  });
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    if (out.includes("STARTED\n")) markStarted();
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on("exit", (code, signal) => resolveExit({ code, signal }));
  });
  return {
    process: child,
    started,
    isStarted: () => isStarted,
    exited,
    output: () => `--- stdout\n${out}--- stderr\n${err}`,
  };
}

/**
 * Runs the generator → files chaos: `kills` SIGKILLs at seeded moments, then a run to the end, then
 * the checks. Throws (with the seed in the message) when an input is missing, doubled or out of order.
 */
export async function runGeneratorToFilesChaos(options: ChaosOptions): Promise<ChaosReport> {
  const began = Date.now();
  const random = seededRandom(options.seed);
  const log = options.log ?? (() => {});
  const work = await mkdtemp(join(tmpdir(), "onceflow-chaos-files-"));
  const outputDirectory = join(work, "out");
  // The job's shape is part of what the seed replays.
  const parallelism = 1 + Math.floor(random() * 2);
  const splits = parallelism * (1 + Math.floor(random() * 2));
  const env = {
    CHAOS_RECORDS: String(options.records),
    CHAOS_SPLITS: String(splits),
    CHAOS_PARALLELISM: String(parallelism),
    CHAOS_CHECKPOINT_INTERVAL: String(40 + Math.floor(random() * 160)),
    // Slow enough that the input outlasts the kills.
    CHAOS_RECORDS_PER_SECOND: String(options.recordsPerSecond ?? 500),
    CHAOS_OUTPUT_DIR: outputDirectory,
    CHAOS_CHECKPOINT_DIR: join(work, "checkpoints"),
  };
  log(
    `chaos generator→files seed=${options.seed} kills=${options.kills} records=${options.records} parallelism=${parallelism} splits=${splits} interval=${env.CHAOS_CHECKPOINT_INTERVAL}ms`,
  );
  const maxDelay = options.maxKillDelayMs ?? 1500;
  let killsDuringStartup = 0;
  let killed = 0;
  try {
    for (let kill = 1; kill <= options.kills; kill++) {
      // Mostly kills of a running job; one in ten lands during startup and recovery instead.
      const duringStartup = random() < 0.1;
      const delay = Math.floor(random() * maxDelay);
      const child = startJob(env);
      const outcome = await Promise.race([
        (duringStartup ? Promise.resolve() : child.started).then(
          () => new Promise<"timer">((resolveTimer) => setTimeout(() => resolveTimer("timer"), delay)),
        ),
        child.exited.then(() => "exited" as const),
      ]);
      if (outcome === "exited") {
        const { code, signal } = await child.exited;
        if (code === 0) {
          log(`  run ${kill}: the job finished before its kill; the remaining kills are not needed`);
          break;
        }
        throw new Error(
          `seed ${options.seed}: run ${kill} failed on its own (${code ?? signal}):\n${child.output()}`,
        );
      }
      const wasStarted = child.isStarted();
      if (!wasStarted) killsDuringStartup++;
      child.process.kill("SIGKILL");
      const { signal } = await child.exited;
      if (signal !== "SIGKILL") {
        throw new Error(
          `seed ${options.seed}: run ${kill} was not killed (exit ${signal}):\n${child.output()}`,
        );
      }
      killed++;
      const progress = (await readCommittedFiles<ChaosRecord>(outputDirectory)).length;
      log(
        `  kill ${kill}/${options.kills} ${wasStarted ? `${delay} ms after start` : `during startup (${delay} ms after spawn)`}: ${progress}/${options.records} committed`,
      );
    }
    const last = startJob(env);
    const { code } = await last.exited;
    if (code !== 0)
      throw new Error(`seed ${options.seed}: the final run failed (${code}):\n${last.output()}`);
    const committed = await readCommittedFiles<ChaosRecord>(outputDirectory);
    checkExactlyOnceInOrder(committed, options.records, options.seed);
    const staging = await readdir(join(outputDirectory, ".staging")).catch(() => []);
    if (staging.length > 0)
      throw new Error(`seed ${options.seed}: staging files left behind: ${staging.join(", ")}`);
    return {
      seed: options.seed,
      kills: killed,
      killsDuringStartup,
      records: options.records,
      committed: committed.length,
      keys: new Set(committed.map((record) => record.key)).size,
      durationMs: Date.now() - began,
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Every id 0…count−1 exactly once (none missing, duplicated or unknown), and within each key `seq`
 * strictly increasing in reading order. Throws with the seed to replay.
 */
export function checkExactlyOnceInOrder(
  committed: readonly ChaosRecord[],
  count: number,
  seed: number,
): void {
  const seen = new Map<number, number>();
  for (const record of committed) seen.set(record.id, (seen.get(record.id) ?? 0) + 1);
  const missing: number[] = [];
  for (let id = 0; id < count; id++) if (!seen.has(id)) missing.push(id);
  const duplicated = [...seen].filter(([, times]) => times > 1).map(([id, times]) => `${id}×${times}`);
  const unknown = [...seen.keys()].filter((id) => !(id >= 0 && id < count));
  const lastOfKey = new Map<string, number>();
  const outOfOrder: string[] = [];
  for (const record of committed) {
    const previous = lastOfKey.get(record.key);
    if (previous !== undefined && record.seq <= previous)
      outOfOrder.push(`${record.key}: ${record.seq} after ${previous}`);
    lastOfKey.set(record.key, record.seq);
  }
  if (missing.length + duplicated.length + unknown.length + outOfOrder.length > 0) {
    const show = (items: Array<string | number>) =>
      `${items.slice(0, 10).join(", ")}${items.length > 10 ? ` … (${items.length})` : ""}`;
    throw new Error(
      `seed ${seed}: committed output is wrong: missing [${show(missing)}], duplicated [${show(duplicated)}], unknown [${show(unknown)}], out of order [${show(outOfOrder)}]. Replay with ONCEFLOW_CHAOS_SEED=${seed}`,
    );
  }
}
