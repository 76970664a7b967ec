import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { repartitionTopicName } from "@onceflow/connector-kafka";
import { chaosKafkaClient, produceInBackground } from "./chaos-input.js";
import { type ChaosResources, createChaosResources } from "./chaos-resources.js";
import { type Child, seededRandom, startJob } from "./chaos-runner.js";
import { readCommitted } from "./committed-output.js";
import type { WindowCount } from "./fixtures/chaos-record.js";
import { SINK_PHASES, type SinkPhase } from "./fixtures/chaos-sinks.js";
import { keyedChaosInput, windowCountViolations, windowOf } from "./keyed-chaos-input.js";
import { startPerSubtaskAttempt } from "./keyed-per-subtask-attempt.js";
import { subtaskProcessLauncher } from "./subtask-process.js";

// Seeded chaos for a keyed windowed count: Kafka → keyBy(key) → tumbling event-time window count →
// an exactly-once KafkaSink or a PostgresSink. The input (keyed-chaos-input.ts) spreads every key
// over every partition, skewed; each attempt runs at the next parallelism of a cycle (2 → 3 → 1 by
// default: every restart is a rescale) and is SIGKILLed after a seeded delay (from the spawn, from
// STARTED or from its first stored checkpoint) or, every few attempts, while its sink stands at a
// phase of the two-phase commit. In the `per-subtask` shape an attempt is one process per subtask,
// the keyBy crossing them through a Kafka repartition topic, and single processes are SIGKILLed
// and frozen (zombies) before the attempt is killed as a whole. A last attempt runs until every window is committed and stops
// with SIGTERM; then an independent reader (read_committed Fetch requests, or a fresh SQL
// connection) must find every (key, window) once, with the count the reference computed from the
// input — results right, not only delivered once.

const here = dirname(fileURLToPath(import.meta.url));
const fixture = join(here, "fixtures", "keyed-window-job.ts");
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One attempt of the job in a deployment shape: killed and awaited as a whole. */
export interface KeyedChaosAttempt {
  /** Resolves once every process of the attempt printed `STARTED`. */
  readonly started: Promise<void>;
  isStarted(): boolean;
  /** Resolves when the attempt ended (every process of it). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` to every process of the attempt. */
  signal(signal: "SIGKILL" | "SIGTERM"): void;
  isAlive(): boolean;
  output(): string;
  /** The processes alive now: the SIGKILLs a kill of the whole attempt sends. */
  aliveProcesses(): number;
  /**
   * Faults inside the attempt before it is killed as a whole (one process per subtask: SIGKILLs of
   * single processes, zombies), once it started; resolves with the SIGKILLs and freezes it did.
   */
  disturb?(): Promise<{ kills: number; zombies: number }>;
  /** What went wrong inside the attempt without ending it (a process that failed by itself). */
  findings?(): readonly string[];
}

/** How a shape starts the keyed job at one parallelism. */
export interface KeyedChaosShape {
  /** What this shape runs the subtasks in, for the log and the report. */
  readonly description: string;
  /** Starts an attempt; a shape that draws its own faults draws them from `random`. */
  start(
    env: Readonly<Record<string, string>>,
    parallelism: number,
    random: () => number,
    log: (line: string) => void,
  ): KeyedChaosAttempt;
  /** Kafka topics the job creates for itself (`jobId`'s), removed after the run. */
  topicsOf?(jobId: string): readonly string[];
}

function oneChild(child: Child): KeyedChaosAttempt {
  return {
    started: child.started,
    isStarted: () => child.isStarted(),
    exited: child.exited,
    signal: (signal) => child.process.kill(signal),
    isAlive: () => child.process.exitCode === null && child.process.signalCode === null,
    output: () => child.output(),
    aliveProcesses: () => (child.process.exitCode === null && child.process.signalCode === null ? 1 : 0),
  };
}

/**
 * The deployment shapes the keyed chaos runs in (`--topology`):
 * - `one-process`: every subtask in one event loop, the exchange in memory;
 * - `threads`: one worker thread per subtask in one process (`onceflow run --threads`), the same
 *   child with CHAOS_THREADS=1: the fixture runs its `createJob` in threads, which exchange records
 *   by key group, the main thread coordinating the checkpoints (at parallelism 1, one thread alone).
 *   A SIGKILL ends every thread at once; a phase kill stops the first thread that reaches the phase.
 * - `per-subtask`: one process per subtask (CHAOS_SUBTASK_INDEX, as a StatefulSet's ordinal), the
 *   keyBy crossing processes through the Kafka repartition topic (CHAOS_EXCHANGE=kafka:
 *   `kafkaRepartitionExchange`). The processes start in a seeded order, all at once or each once the
 *   one before is ready; before the attempt is killed as a whole, single processes are SIGKILLed
 *   and restarted, or frozen while a replacement runs and resumed (zombies, which must end by
 *   themselves) — keyed-per-subtask-attempt.ts. A phase kill kills every process once the first
 *   reaches the phase. Every process SIGKILLed counts as a kill. Each process restarts a failed
 *   attempt in process (10 times, as the per-subtask chaos does); one that fails for good is a
 *   violation.
 */
export const KEYED_CHAOS_SHAPES = {
  "one-process": {
    description: "every subtask in one process, the exchange in memory",
    start: (env, parallelism) =>
      oneChild(startJob({ ...env, CHAOS_PARALLELISM: String(parallelism) }, fixture)),
  },
  threads: {
    description: "one worker thread per subtask in one process, the exchange between the threads",
    start: (env, parallelism) =>
      oneChild(startJob({ ...env, CHAOS_PARALLELISM: String(parallelism), CHAOS_THREADS: "1" }, fixture)),
  },
  "per-subtask": {
    description: "one process per subtask, the exchange through a Kafka repartition topic",
    start: (env, parallelism, random, log) =>
      startPerSubtaskAttempt(
        subtaskProcessLauncher(fixture),
        {
          ...env,
          CHAOS_EXCHANGE: "kafka",
          // As in the per-subtask chaos (and in production): a process retries a failed attempt in
          // process — a replacement whose sink start waits on a lock that a frozen zombie holds
          // fails it with a lock timeout, by design — and one that still fails is a violation.
          CHAOS_RESTART_ATTEMPTS: "10",
          CHAOS_RESTART_DELAY: "300",
        },
        parallelism,
        random,
        log,
      ),
    // The repartition topic before the window count (uid `count`), with a partition per key group.
    topicsOf: (jobId) => [repartitionTopicName(jobId, "count")],
  },
} satisfies Record<string, KeyedChaosShape>;

/** A shape's name, a key of {@link KEYED_CHAOS_SHAPES}. */
export type KeyedChaosShapeName = keyof typeof KEYED_CHAOS_SHAPES;

/** True when `name` is a shape the keyed chaos can run in. */
export function isKeyedChaosShape(name: string): name is KeyedChaosShapeName {
  return Object.hasOwn(KEYED_CHAOS_SHAPES, name);
}

export interface KeyedChaosOptions {
  readonly shape: KeyedChaosShapeName;
  readonly sink: "kafka" | "postgres";
  readonly seed: number;
  /** SIGKILLs before the last attempt (of processes: an attempt of three processes killed is three). */
  readonly kills: number;
  readonly records: number;
  readonly brokers: readonly string[];
  /** Required for the PostgreSQL sink. */
  readonly postgresUrl?: string;
  /** The parallelism of attempt n is `parallelisms[n % length]` (default 2, 3, 1). */
  readonly parallelisms?: readonly number[];
  /** Every this many kills, one lands at a sink phase, the phases in turn (default 4; 0: never). */
  readonly phaseKillEvery?: number;
  /** The window's size, ms of event time (default 1000: about 100 records). */
  readonly windowMs?: number;
  /** Input partitions (default 4: more than the highest parallelism, so some subtask reads two). */
  readonly partitions?: number;
  /** Shortest and longest delay before a random kill, ms (default 300…2500), from STARTED or the spawn. */
  readonly minKillDelayMs?: number;
  readonly maxKillDelayMs?: number;
  /** How fast the input is produced (default 200/s). */
  readonly recordsPerSecond?: number;
  readonly log?: (line: string) => void;
}

export interface KeyedChaosReport {
  readonly shape: KeyedChaosShapeName;
  readonly sink: "kafka" | "postgres";
  readonly seed: number;
  /** Processes SIGKILLed. */
  readonly kills: number;
  /** Attempts killed as a whole (one process per subtask: every process of the attempt at once). */
  readonly attempts: number;
  /** Kills of single processes inside an attempt (one process per subtask). */
  readonly singleProcessKills: number;
  /** Processes frozen and resumed after a replacement started (one process per subtask). */
  readonly zombies: number;
  readonly killsDuringStartup: number;
  /** Kills that landed with a sink standing at a phase, per phase. */
  readonly phaseKills: Readonly<Record<string, number>>;
  /** Phase kills whose phase the attempt did not reach in time (killed anyway). */
  readonly phasesNotReached: number;
  readonly parallelisms: readonly number[];
  readonly records: number;
  readonly hotKeyShare: number;
  /** (key, window) counts expected, and rows the reader found. */
  readonly windows: number;
  readonly rows: number;
  /** Empty when every count is right. */
  readonly violations: readonly string[];
  readonly durationMs: number;
}

/** True once a line of `attempt`'s output starts with `marker`; false after `timeoutMs` or its end. */
async function untilOutput(attempt: KeyedChaosAttempt, marker: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (attempt.isAlive() && Date.now() < deadline) {
    if (attempt.output().includes(`\n${marker}`)) return true;
    await sleep(20);
  }
  return false;
}

/** What a random kill's delay counts from. */
type KillAnchor = "spawn" | "STARTED" | "checkpoint";

/** Resolves when `anchor` happened in `attempt` (a checkpoint that never comes: after 20 s). */
async function anchored(attempt: KeyedChaosAttempt, anchor: KillAnchor): Promise<void> {
  if (anchor === "STARTED") await attempt.started;
  if (anchor === "checkpoint") await untilOutput(attempt, "CHECKPOINT ", 20_000);
}

/** Runs one keyed chaos (see the file's header). A wrong count is in `violations`, with the seed. */
export async function runKeyedChaos(options: KeyedChaosOptions): Promise<KeyedChaosReport> {
  const began = Date.now();
  const random = seededRandom(options.seed);
  // A shape's own faults draw from a random of their own: the other draws stay those of the seed.
  const shapeRandom = seededRandom(options.seed ^ 0x5ab7a5c);
  const print = options.log ?? (() => {});
  const log = (line: string) => print(`[${((Date.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  const shape: KeyedChaosShape = KEYED_CHAOS_SHAPES[options.shape];
  const parallelisms = options.parallelisms ?? [2, 3, 1];
  const partitions = options.partitions ?? 4;
  const windowMs = options.windowMs ?? 1000;
  const phaseKillEvery = options.phaseKillEvery ?? 4;
  const name = `chaos-keyed-${options.sink === "kafka" ? "k" : "pg"}-${options.seed}-${Date.now().toString(36)}`;
  const input = keyedChaosInput(random, options.records, partitions, windowMs);
  const resources = await createChaosResources({
    name,
    sink: options.sink,
    storage: "filesystem",
    brokers: options.brokers,
    postgresUrl: options.postgresUrl,
    partitions,
    tableColumns: "key text NOT NULL, window_start bigint NOT NULL, count integer NOT NULL",
  });
  const env: Record<string, string> = {
    ...resources.env,
    CHAOS_BROKERS: options.brokers.join(","),
    CHAOS_JOB_ID: name,
    CHAOS_INPUT_TOPIC: resources.inputTopic,
    CHAOS_WINDOW_MS: String(windowMs),
    // `CHECKPOINT <id>` on each stored checkpoint: what a kill's delay can count from.
    CHAOS_REPORT_CHECKPOINTS: "1",
    CHAOS_CHECKPOINT_INTERVAL: String(50 + Math.floor(random() * 200)),
    CHAOS_MAX_BATCH: String(10 + Math.floor(random() * 90)),
  };
  log(
    `chaos keyed window count → ${options.sink} (${options.shape}: ${shape.description}) seed=${options.seed} kills=${options.kills} records=${options.records} windows=${input.reference.size} hot=${input.hotShare.toFixed(2)} parallelisms=${parallelisms.join("→")} partitions=${partitions} interval=${env.CHAOS_CHECKPOINT_INTERVAL}ms batch=${env.CHAOS_MAX_BATCH}`,
  );
  const read = () =>
    readCommitted<WindowCount>(resources.output, "key, window_start::float8 AS start, count");
  const producing = produceInBackground(
    options.brokers,
    resources.inputTopic,
    input.messages,
    options.recordsPerSecond ?? 200,
    (id) => input.message(id),
  );
  const minDelay = options.minKillDelayMs ?? 300;
  const maxDelay = options.maxKillDelayMs ?? 2500;
  const phaseKills: Record<string, number> = {};
  let phasesNotReached = 0;
  let killsDuringStartup = 0;
  let killed = 0;
  let attempts = 0;
  let singleProcessKills = 0;
  let zombies = 0;
  const findings: string[] = [];
  const used: number[] = [];
  // The attempt alive now, SIGKILLed in `finally` if a check throws: no job outlives the chaos.
  let current: KeyedChaosAttempt | undefined;
  try {
    for (let kill = 1; killed < options.kills; kill++) {
      const parallelism = parallelisms[(kill - 1) % parallelisms.length] as number;
      used.push(parallelism);
      const phase: SinkPhase | undefined =
        phaseKillEvery > 0 && kill % phaseKillEvery === 0
          ? SINK_PHASES[(kill / phaseKillEvery - 1) % SINK_PHASES.length]
          : undefined;
      const delay = minDelay + Math.floor(random() * (maxDelay - minDelay));
      const atCount = 1 + Math.floor(random() * 3);
      // One delay in ten counts from the spawn (kills in startup), four from STARTED (in recovery, or
      // soon after), half from the attempt's first stored checkpoint: every such attempt gets on.
      const draw = random();
      const anchor: KillAnchor = draw < 0.1 ? "spawn" : draw < 0.5 ? "STARTED" : "checkpoint";
      const attempt = shape.start(
        phase === undefined ? env : { ...env, CHAOS_KILL_AT: phase, CHAOS_KILL_AT_COUNT: String(atCount) },
        parallelism,
        shapeRandom,
        log,
      );
      current = attempt;
      // Faults of single processes first (not while a phase kill waits: it must find the phase).
      if (phase === undefined && attempt.disturb !== undefined) {
        const disturbed = await attempt.disturb();
        singleProcessKills += disturbed.kills;
        zombies += disturbed.zombies;
        killed += disturbed.kills;
      }
      // A phase kill waits for the sink to stand there (a recovery commit needs a transaction left
      // pending by the attempt before, so it may never come: then it is a late random kill).
      const outcome = await Promise.race([
        phase !== undefined
          ? untilOutput(attempt, "PHASE ", 8000 + maxDelay).then((at) => (at ? "phase" : "timer"))
          : anchored(attempt, anchor)
              .then(() => sleep(delay))
              .then(() => "timer" as const),
        attempt.exited.then(() => "exited" as const),
      ]);
      if (outcome === "exited") {
        const { code, signal } = await attempt.exited;
        throw new Error(
          `seed ${options.seed}: attempt ${kill} (parallelism ${parallelism}) ended on its own (${code ?? signal}):\n${attempt.output()}`,
        );
      }
      const duringStartup = !attempt.isStarted();
      if (duringStartup) killsDuringStartup++;
      const processes = attempt.aliveProcesses();
      attempt.signal("SIGKILL");
      const { signal } = await attempt.exited;
      if (signal !== "SIGKILL")
        throw new Error(
          `seed ${options.seed}: attempt ${kill} was not killed (${signal}):\n${attempt.output()}`,
        );
      killed += processes;
      attempts++;
      findings.push(...(attempt.findings?.() ?? []));
      if (phase !== undefined && outcome === "phase") phaseKills[phase] = (phaseKills[phase] ?? 0) + 1;
      if (phase !== undefined && outcome !== "phase") phasesNotReached++;
      const where =
        phase === undefined
          ? `${delay} ms after ${anchor === "checkpoint" ? "the first checkpoint" : anchor}${duringStartup ? " (before STARTED)" : ""}`
          : outcome === "phase"
            ? `at ${phase} (its ${atCount}. time)`
            : `${phase} not reached: killed late`;
      const what = processes === 1 ? "" : ` (${processes} processes)`;
      log(
        `  kill ${kill} p=${parallelism}${what} ${where}: ${killed}/${options.kills} SIGKILLs, ${(await read()).length} rows committed`,
      );
    }
    await producing.done;
    // The last attempt: until every window is committed, then SIGTERM (a final checkpoint, exit 0).
    const parallelism = parallelisms[attempts % parallelisms.length] as number;
    used.push(parallelism);
    const last = shape.start(env, parallelism, shapeRandom, log);
    current = last;
    // It may have a long backlog: it fails only when no row came for two minutes. It waits for
    // every window, not for as many rows (a window written twice must not end the wait early).
    let rows = await read();
    let progressAt = Date.now();
    const windowsIn = (found: readonly WindowCount[]) => new Set(found.map(windowOf)).size;
    while (windowsIn(rows) < input.reference.size) {
      if (!last.isAlive() || Date.now() > progressAt + 120_000) {
        log(
          `  the last attempt committed ${windowsIn(rows)}/${input.reference.size} windows:\n${last.output().slice(-3000)}`,
        );
        break;
      }
      await sleep(250);
      const before = rows.length;
      rows = await read();
      if (rows.length > before) progressAt = Date.now();
    }
    if (last.isAlive()) {
      // SIGTERM before the job installed its handlers would kill it outright.
      await Promise.race([last.started, last.exited]);
      await sleep(200);
      last.signal("SIGTERM");
      const { code } = await last.exited;
      if (code !== 0)
        throw new Error(`seed ${options.seed}: the last attempt failed (${code}):\n${last.output()}`);
    }
    findings.push(...(last.findings?.() ?? []));
    // Commit markers are written after EndTxn returns: give a late duplicate time to show.
    await sleep(1000);
    rows = await read();
    // A process that failed by itself, or a zombie that did not end by itself, is a bug even when
    // every count is right.
    const violations = [...windowCountViolations(rows, input.reference), ...findings].map(
      (violation) => `seed ${options.seed}: ${violation}`,
    );
    return {
      shape: options.shape,
      sink: options.sink,
      seed: options.seed,
      kills: killed,
      attempts,
      singleProcessKills,
      zombies,
      killsDuringStartup,
      phaseKills,
      phasesNotReached,
      parallelisms: [...new Set(used)],
      records: options.records,
      hotKeyShare: Number(input.hotShare.toFixed(3)),
      windows: input.reference.size,
      rows: rows.length,
      violations,
      durationMs: Date.now() - began,
    };
  } finally {
    if (current?.isAlive()) {
      current.signal("SIGKILL");
      await current.exited;
    }
    producing.stop();
    await producing.done.catch(() => undefined);
    const topics = shape.topicsOf?.(name) ?? [];
    if (process.env.ONCEFLOW_CHAOS_KEEP === "1")
      log(
        `  kept (ONCEFLOW_CHAOS_KEEP=1): ${[resources.inputTopic, ...topics].join(", ")}, ${JSON.stringify(resources.output)}`,
      );
    else await removeAll(resources, topics, options.brokers, log);
  }
}

/** Removes the run's topics, table and folders, and the topics its job created (`topics`). */
async function removeAll(
  resources: ChaosResources,
  topics: readonly string[],
  brokers: readonly string[],
  log: (line: string) => void,
): Promise<void> {
  log("  removing the run's topics and tables");
  await resources.remove().catch(() => undefined);
  if (topics.length > 0) {
    const admin = chaosKafkaClient(brokers).admin();
    await admin
      .connect()
      .then(() => admin.deleteTopics({ topics: [...topics], timeout: 5000 }))
      .catch(() => undefined)
      .finally(() => admin.disconnect());
  }
  log("  removed");
}
