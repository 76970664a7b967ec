import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createKafkaTopic } from "@onceflow/testkit";
import pg from "pg";
import { chaosKafkaClient, produceInBackground } from "./chaos-input.js";
import { type Child, checkExactlyOnceInOrder, seededRandom, startJob } from "./chaos-runner.js";
import { type ChaosOutput, readCommitted as readCommittedOutput } from "./committed-output.js";
import type { ChaosRecord } from "./fixtures/chaos-record.js";

// Seeded chaos for Kafka → Kafka and Kafka → PostgreSQL, in the style of the generator → files
// chaos: the input is produced into a topic while the job (a child process) is SIGKILLed after
// seeded random delays and restarted from its last checkpoint each time; then a last run catches up
// and is stopped with SIGTERM (a final checkpoint). An independent reader — raw read_committed
// Fetch requests for Kafka, a fresh SQL connection for PostgreSQL — checks every input exactly once
// and each key's order. An optional fault (a broker kill and restart, a PostgreSQL crash) hits one
// run while it is alive.

const here = dirname(fileURLToPath(import.meta.url));
const fixture = join(here, "fixtures", "kafka-chaos-job.ts");

export type KafkaChaosSink = "kafka" | "postgres";

export interface KafkaChaosOptions {
  readonly sink: KafkaChaosSink;
  readonly seed: number;
  readonly kills: number;
  readonly records: number;
  readonly brokers: string[];
  /** Required for the PostgreSQL sink. */
  readonly postgresUrl?: string;
  /** Shortest and longest delay between a job's spawn and its kill, ms (default 300…2500). */
  readonly minKillDelayMs?: number;
  readonly maxKillDelayMs?: number;
  /** How fast the input is produced (default 200/s). */
  readonly recordsPerSecond?: number;
  /**
   * A service fault injected during the run that ends with kill number `kill`: after its delay,
   * `inject()` runs (the service must be back when it resolves), then the run goes on for
   * `runAfterMs` (default 2000) before its SIGKILL.
   */
  readonly fault?: {
    readonly kill: number;
    readonly inject: () => Promise<void>;
    readonly runAfterMs?: number;
  };
  readonly log?: (line: string) => void;
}

export interface KafkaChaosReport {
  readonly sink: KafkaChaosSink;
  readonly seed: number;
  readonly kills: number;
  readonly killsDuringStartup: number;
  readonly records: number;
  readonly committed: number;
  readonly durationMs: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function outputOf(options: KafkaChaosOptions, target: string): ChaosOutput {
  return options.sink === "kafka"
    ? { sink: "kafka", brokers: options.brokers, topic: target }
    : { sink: "postgres", postgresUrl: options.postgresUrl ?? "", table: target };
}

const readCommitted = (options: KafkaChaosOptions, target: string) =>
  readCommittedOutput(outputOf(options, target));

/**
 * Runs one chaos: `kills` SIGKILLs at seeded moments while the input is produced, an optional fault,
 * a last run until every input is committed, then the checks. Throws (with the seed) on a failure.
 */
export async function runKafkaChaos(options: KafkaChaosOptions): Promise<KafkaChaosReport> {
  const began = Date.now();
  const random = seededRandom(options.seed);
  const log = options.log ?? (() => {});
  const work = await mkdtemp(join(tmpdir(), `onceflow-chaos-k2${options.sink}-`));
  const name = `chaos-k2${options.sink === "kafka" ? "k" : "pg"}-${options.seed}-${Date.now().toString(36)}`;
  const input = `${name}-in`;
  const output = options.sink === "kafka" ? `${name}-out` : name.replaceAll("-", "_");
  const parallelism = 1 + Math.floor(random() * 2);
  const env: Record<string, string> = {
    CHAOS_SINK: options.sink,
    CHAOS_BROKERS: options.brokers.join(","),
    CHAOS_JOB_ID: name,
    CHAOS_INPUT_TOPIC: input,
    CHAOS_PARALLELISM: String(parallelism),
    CHAOS_CHECKPOINT_INTERVAL: String(50 + Math.floor(random() * 200)),
    CHAOS_MAX_BATCH: String(10 + Math.floor(random() * 90)),
    CHAOS_CHECKPOINT_DIR: join(work, "checkpoints"),
    CHAOS_RESTART_ATTEMPTS: options.fault === undefined ? "0" : "30",
    // A transaction pre-committed when the broker is killed must outlive the outage, which takes
    // over a minute on a loaded machine: the broker aborts it otherwise, and the checkpoint's data is
    // lost by Kafka's rule (TRANSACTION_TIMED_OUT), not by the job. The broker allows up to 900 s.
    ...(options.fault === undefined ? {} : { CHAOS_TRANSACTION_TIMEOUT: "600000" }),
    ...(options.sink === "kafka"
      ? { CHAOS_OUTPUT_TOPIC: output }
      : { CHAOS_POSTGRES_URL: options.postgresUrl ?? "", CHAOS_TABLE: output }),
  };
  log(
    `chaos kafka→${options.sink} seed=${options.seed} kills=${options.kills} records=${options.records} parallelism=${parallelism} interval=${env.CHAOS_CHECKPOINT_INTERVAL}ms batch=${env.CHAOS_MAX_BATCH}`,
  );
  if (options.sink === "kafka")
    for (const topic of [input, output]) await createKafkaTopic(options.brokers, topic, { partitions: 3 });
  else {
    if (options.postgresUrl === undefined) throw new Error("postgresUrl is required for the PostgreSQL sink");
    await createKafkaTopic(options.brokers, input, { partitions: 3 });
    const client = new pg.Client({ connectionString: options.postgresUrl });
    await client.connect();
    await client.query(
      `CREATE TABLE ${pg.escapeIdentifier(output)} (pos bigserial PRIMARY KEY, id integer NOT NULL, key text NOT NULL, seq integer NOT NULL)`,
    );
    await client.end();
  }
  const producing = produceInBackground(
    options.brokers,
    input,
    options.records,
    options.recordsPerSecond ?? 200,
  );
  const minDelay = options.minKillDelayMs ?? 300;
  const maxDelay = options.maxKillDelayMs ?? 2500;
  let killed = 0;
  let killsDuringStartup = 0;
  // The run alive now, SIGKILLed in `finally` if a check throws: no job outlives the chaos.
  let current: Child | undefined;
  try {
    for (let kill = 1; kill <= options.kills; kill++) {
      // Measured from the spawn, not from STARTED: a run costs at most its delay however slow the
      // machine is; the short ones land in startup and recovery, the long ones while records flow.
      const delay = minDelay + Math.floor(random() * (maxDelay - minDelay));
      const child = startJob(env, fixture);
      current = child;
      const outcome = await Promise.race([
        sleep(delay).then(() => "timer" as const),
        child.exited.then(() => "exited" as const),
      ]);
      if (outcome === "exited") {
        const { code, signal } = await child.exited;
        throw new Error(
          `seed ${options.seed}: run ${kill} ended on its own (${code ?? signal}):\n${child.output()}`,
        );
      }
      if (options.fault?.kill === kill) {
        // The fault hits while this run is alive; it restarts itself in-process until the service
        // is back. No input is written meanwhile, so every input is written exactly once.
        await producing.pause();
        log(`  run ${kill}: fault injected ${delay} ms after spawn`);
        await options.fault.inject();
        producing.resume();
        await sleep(options.fault.runAfterMs ?? 2000);
        if (child.process.exitCode !== null || child.process.signalCode !== null)
          throw new Error(`seed ${options.seed}: run ${kill} did not survive the fault:\n${child.output()}`);
        log(`  run ${kill}: service back, the run went on`);
      }
      const duringStartup = !child.isStarted();
      if (duringStartup) killsDuringStartup++;
      child.process.kill("SIGKILL");
      const { signal } = await child.exited;
      if (signal !== "SIGKILL")
        throw new Error(`seed ${options.seed}: run ${kill} was not killed (${signal}):\n${child.output()}`);
      killed++;
      const progress = (await readCommitted(options, output)).length;
      log(
        `  kill ${kill}/${options.kills} ${delay} ms after spawn${duringStartup ? " (before STARTED)" : ""}: ${progress} committed`,
      );
    }
    await producing.done;
    // The last run: until every input is committed, then SIGTERM (a final checkpoint, exit 0).
    const last = startJob(env, fixture);
    current = last;
    let committed: ChaosRecord[] = [];
    const deadline = Date.now() + 60_000;
    for (;;) {
      committed = await readCommitted(options, output);
      if (committed.length >= options.records) break;
      if (last.process.exitCode !== null || last.process.signalCode !== null || Date.now() > deadline) {
        last.process.kill("SIGKILL");
        await last.exited;
        throw new Error(
          `seed ${options.seed}: the last run committed ${committed.length}/${options.records}:\n${last.output()}`,
        );
      }
      await sleep(250);
    }
    // SIGTERM before the job installed its handlers would kill it outright.
    await Promise.race([last.started, last.exited]);
    await sleep(200);
    last.process.kill("SIGTERM");
    const { code } = await last.exited;
    if (code !== 0) throw new Error(`seed ${options.seed}: the last run failed (${code}):\n${last.output()}`);
    // Commit markers are written after EndTxn returns: give a late duplicate time to show.
    await sleep(1000);
    committed = await readCommitted(options, output);
    checkExactlyOnceInOrder(committed, options.records, options.seed);
    return {
      sink: options.sink,
      seed: options.seed,
      kills: killed,
      killsDuringStartup,
      records: options.records,
      committed: committed.length,
      durationMs: Date.now() - began,
    };
  } finally {
    if (current !== undefined && current.process.exitCode === null && current.process.signalCode === null) {
      current.process.kill("SIGKILL");
      await current.exited;
    }
    producing.resume();
    await producing.done.catch(() => undefined);
    await rm(work, { recursive: true, force: true });
    await cleanUp(options, input, output).catch(() => undefined);
  }
}

async function cleanUp(options: KafkaChaosOptions, input: string, output: string): Promise<void> {
  const admin = chaosKafkaClient(options.brokers).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: options.sink === "kafka" ? [input, output] : [input], timeout: 5000 });
  } finally {
    await admin.disconnect();
  }
  if (options.sink === "postgres") {
    const client = new pg.Client({ connectionString: options.postgresUrl });
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(output)}`);
    await client.end();
  }
}
