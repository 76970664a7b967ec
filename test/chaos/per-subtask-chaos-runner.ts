import { type BackgroundInput, produceInBackground } from "./chaos-input.js";
import { type ChaosResources, createChaosResources } from "./chaos-resources.js";
import { checkExactlyOnceInOrder, seededRandom } from "./chaos-runner.js";
import { preparedTransactionsOf, readCommitted } from "./committed-output.js";
import type { ContainerPlatform } from "./container-platform.js";
import { Deployment, DeploymentFailure, type ZombieOutcome } from "./deployment.js";
import type { ChaosRecord } from "./fixtures/chaos-record.js";
import { describeSegment, planSchedule, type Segment } from "./per-subtask-schedule.js";

// Multi-process chaos: Kafka → Kafka or Kafka → PostgreSQL run as one process per subtask
// (StatefulSet style), checkpoints on the filesystem or in PostgreSQL, rescaled P → Q → P while the
// input is produced, with SIGKILLs and zombies (SIGSTOP, a replacement, SIGCONT) on a seeded
// schedule. At the end every process is stopped with SIGTERM and an independent reader checks every
// input exactly once; no prepared transaction of the sink may remain, and every zombie must have
// ended by itself. Violations are collected into the report rather than thrown at the first one.
// With `containers` the subtasks run as containers of the job image (container-platform.ts): a kill
// is `docker kill`, a freeze `docker pause`, and the schedule may add network partitions of a
// subtask and kills of the broker (the input is held while the broker is away).

export interface PerSubtaskChaosOptions {
  readonly sink: "kafka" | "postgres";
  readonly storage: "filesystem" | "postgres";
  readonly seed: number;
  readonly kills: number;
  readonly zombies: number;
  readonly records: number;
  /** Input rate (default 150/s). */
  readonly recordsPerSecond?: number;
  readonly brokers: readonly string[];
  /** Required for the PostgreSQL sink or storage. */
  readonly postgresUrl?: string;
  /** Partitions of the input and output topics (default 6). */
  readonly partitions?: number;
  readonly maxEventGapMs?: number;
  readonly maxFrozenMs?: number;
  /** Fixed parallelisms instead of seeded ones, for example `[2, 3, 2]`. */
  readonly parallelisms?: readonly number[];
  /** The chance that a process stores one of its first checkpoints after its timeout (default 0.2). */
  readonly slowStoreChance?: number;
  /** How long a zombie may run after SIGCONT before it counts as `survived` (default 20 s). */
  readonly zombieGraceMs?: number;
  /** How long the last run has to commit every input (default 120 s). */
  readonly catchUpTimeoutMs?: number;
  /** Run the subtasks as containers on this platform (`brokers`/`postgresUrl` are its host-side ones). */
  readonly containers?: ContainerPlatform;
  /** Network partitions of one subtask's container (containers only). */
  readonly networkPartitions?: number;
  /** Kills of the broker's container (containers only). */
  readonly brokerKills?: number;
  readonly log?: (line: string) => void;
}

export interface PerSubtaskChaosReport {
  readonly pipeline: string;
  readonly storage: string;
  readonly seed: number;
  readonly parallelisms: readonly number[];
  readonly starts: readonly string[];
  readonly kills: number;
  /** Where the subtasks ran: `processes` or `containers`. */
  readonly platform: string;
  readonly networkPartitions: number;
  readonly brokerKills: number;
  /** Processes that ended during a partition or a broker outage (restarted), by how they ended. */
  readonly faultEndings: Readonly<Record<string, number>>;
  readonly rescaleStops: readonly string[];
  readonly zombies: Readonly<Partial<Record<ZombieOutcome, number>>>;
  /** Processes that failed on their own (restarted by the supervisor), by error code. */
  readonly crashes: Readonly<Record<string, number>>;
  /** Processes that stored a checkpoint after its timeout. */
  readonly lateStores: number;
  readonly records: number;
  readonly committed: number;
  readonly distinct: number;
  readonly preparedLeft: readonly string[];
  readonly notes: readonly string[];
  /** Empty when the run passed. */
  readonly violations: readonly string[];
  readonly durationMs: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

/** What changes where the subtasks run as containers next to a broker that may be killed. */
function containerJobSettings(options: PerSubtaskChaosOptions): Record<string, string> {
  if ((options.brokerKills ?? 0) === 0) return {};
  return {
    // A process rides out the broker's restart (tens of seconds on a loaded machine) in-process.
    CHAOS_RESTART_ATTEMPTS: "60",
    CHAOS_RESTART_DELAY: "500",
    // A transaction pre-committed when the broker is killed must outlive the outage.
    CHAOS_TRANSACTION_TIMEOUT: "180000",
  };
}

/** The job's settings that the seed fixes besides the schedule. */
function jobSettings(seed: number, slowStoreChance: number): Record<string, string> {
  const random = seededRandom(seed ^ 0x5eed);
  return {
    CHAOS_CHECKPOINT_INTERVAL: String(100 + Math.floor(random() * 200)),
    CHAOS_MAX_BATCH: String(10 + Math.floor(random() * 90)),
    // Some processes store one checkpoint late, after its timeout: it was declared failed and must
    // never become restorable (the in-process restart that follows must not be misled by it).
    CHAOS_CHECKPOINT_TIMEOUT: "2500",
    CHAOS_SLOW_STORE_CHANCE: String(slowStoreChance),
    CHAOS_SLOW_STORE_DELAY: "4000",
    // A zombie's restart strategy runs as in production; a process that still fails is restarted
    // by the supervisor.
    CHAOS_RESTART_ATTEMPTS: "10",
    CHAOS_RESTART_DELAY: "300",
    // Warnings (retries, fencing) show in a process's output when a run fails.
    CHAOS_LOG_LEVEL: "warn",
    // A restored checkpoint's transactions must outlive a few kills and slow restarts on a loaded
    // machine: past this timeout the broker aborts them and their data is lost (loudly).
    CHAOS_TRANSACTION_TIMEOUT: "60000",
  };
}

/** What the events of a run did so far. */
interface Counts {
  kills: number;
  networkPartitions: number;
  brokerKills: number;
}

/** How long after a fault a process's end is still put down to it. */
const FAULT_GRACE_MS = 30_000;

async function runSegment(
  deployment: Deployment,
  segment: Segment,
  options: PerSubtaskChaosOptions,
  input: BackgroundInput,
  counts: Counts,
  log: (line: string) => void,
): Promise<void> {
  await deployment.start(segment.parallelism, segment.order, segment.start, segment.gapsMs, 60_000);
  const platform = options.containers;
  const [killWord, stopWord, contWord] = platform
    ? ["docker kill", "docker pause", "docker unpause"]
    : ["SIGKILL", "SIGSTOP", "SIGCONT"];
  for (const event of segment.events) {
    if (event.afterReady) await deployment.untilReady(event.subtask, 30_000);
    await sleep(event.afterMs);
    deployment.check();
    if (event.kind === "kill") {
      const victim = await deployment.kill(event.subtask, event.restartAfterMs);
      if (victim) counts.kills++;
      log(
        `    ${killWord} ${victim?.name ?? `subtask ${event.subtask} (not running)`}${victim?.isReady() ? "" : " (before ready)"}`,
      );
    } else if (event.kind === "zombie") {
      const zombie = await deployment.freeze(event.subtask);
      if (!zombie) continue;
      const after = event.frozenUntilReplacementReady ? " after the replacement is ready" : "";
      log(
        `    ${stopWord} ${zombie.process.name}, replacement started; ${contWord} ${event.frozenMs} ms${after}`,
      );
      if (event.frozenUntilReplacementReady) await deployment.untilReady(event.subtask, 30_000);
      await sleep(event.frozenMs);
      await deployment.thaw(zombie);
    } else if (event.kind === "partition") {
      if (!platform) throw new Error("network partitions need the subtasks in containers");
      const victim = deployment.running(event.subtask);
      if (!victim) continue;
      const container = platform.containerOf(victim.name);
      deployment.excuse(event.subtask, Date.now() + event.cutMs + FAULT_GRACE_MS);
      const address = await platform.disconnect(container);
      counts.networkPartitions++;
      log(`    docker network disconnect ${victim.name} for ${event.cutMs} ms`);
      await sleep(event.cutMs);
      // It may have ended meanwhile (and its container with it).
      if (victim.isAlive()) await platform.connect(container, address).catch(() => undefined);
    } else {
      if (!platform) throw new Error("broker kills need the services in containers");
      // No input is written while the broker is away (the producer's retries would give up on a
      // loaded machine), and no thawed zombie is still deciding how to end.
      await input.pause();
      await deployment.awaitZombies(options.zombieGraceMs ?? 20_000);
      deployment.excuse("all", Number.POSITIVE_INFINITY);
      const began = Date.now();
      await platform.killBroker();
      counts.brokerKills++;
      await sleep(event.downMs);
      await platform.startBroker();
      deployment.excuse("all", Date.now() + FAULT_GRACE_MS);
      input.resume();
      log(
        `    docker kill of the broker, started again after ${event.downMs} ms, serving after ${Date.now() - began} ms`,
      );
    }
  }
  await sleep(segment.tailMs);
  if (segment.stop) {
    await deployment.awaitZombies(options.zombieGraceMs ?? 20_000);
    await deployment.stopAll(segment.stop);
  }
}

/** Waits until every input id was committed (or the deadline), polling the independent reader. */
async function catchUp(
  resources: ChaosResources,
  deployment: Deployment,
  records: number,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const committed = await readCommitted(resources.output);
    if (new Set(committed.map((record) => record.id)).size >= records) return true;
    if (Date.now() > deadline) return false;
    deployment.check();
    await sleep(1000);
  }
}

/** Runs the whole schedule of `options.seed` and checks the output. */
export async function runPerSubtaskChaos(options: PerSubtaskChaosOptions): Promise<PerSubtaskChaosReport> {
  const began = Date.now();
  const print = options.log ?? (() => {});
  const log = (line: string) => print(`[${((Date.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  const schedule = planSchedule(options);
  const name = `chaos-ps-${options.sink === "kafka" ? "k" : "pg"}-${options.storage === "filesystem" ? "fs" : "pg"}-${options.seed}-${Date.now().toString(36)}`;
  const resources = await createChaosResources({
    name,
    sink: options.sink,
    storage: options.storage,
    brokers: options.brokers,
    postgresUrl: options.postgresUrl,
    ...(options.containers
      ? { jobPostgresUrl: options.containers.jobPostgresUrl, sharedCheckpointFolder: true }
      : {}),
    partitions: options.partitions ?? 6,
  });
  const env: Record<string, string> = {
    ...resources.env,
    ...jobSettings(options.seed, options.slowStoreChance ?? 0.2),
    ...(options.containers ? containerJobSettings(options) : {}),
    CHAOS_BROKERS: (options.containers?.jobBrokers ?? options.brokers).join(","),
    CHAOS_JOB_ID: name,
    CHAOS_INPUT_TOPIC: resources.inputTopic,
  };
  log(
    `chaos per-subtask kafka→${options.sink}, checkpoints in ${options.storage}, seed=${options.seed}, records=${options.records}, interval=${env.CHAOS_CHECKPOINT_INTERVAL}ms, batch=${env.CHAOS_MAX_BATCH}`,
  );
  const deployment = new Deployment({
    env,
    log,
    ...(options.containers ? { launch: options.containers.launch } : {}),
  });
  let input: BackgroundInput | undefined;
  const violations: string[] = [];
  try {
    input = produceInBackground(
      options.brokers,
      resources.inputTopic,
      options.records,
      options.recordsPerSecond ?? 150,
    );
    const counts: Counts = { kills: 0, networkPartitions: 0, brokerKills: 0 };
    let stop: "SIGTERM" | "SIGKILL" = "SIGTERM";
    try {
      for (const [index, segment] of schedule.entries()) {
        log(`  ${describeSegment(segment, index)}`);
        await runSegment(deployment, segment, options, input, counts, log);
        const progress = await readCommitted(resources.output);
        log(`  segment ${index + 1} done: ${progress.length} committed`);
      }
      await input.done;
      const timeout = options.catchUpTimeoutMs ?? 120_000;
      if (!(await catchUp(resources, deployment, options.records, timeout)))
        violations.push(
          `the last run did not commit every input within ${timeout} ms; the processes said:\n${deployment.outputTails()}`,
        );
    } catch (error) {
      if (!(error instanceof DeploymentFailure)) throw error;
      // The job cannot go on (it cannot restart from its checkpoint): check what it left.
      violations.push(error.message.slice(0, 4000));
      log(`  ${error.message.slice(0, 2000)}`);
      stop = "SIGKILL";
    }
    await deployment.awaitZombies(options.zombieGraceMs ?? 20_000);
    await deployment.stopAll(stop);
    // Commit markers are written after EndTxn returns: give a late duplicate time to show.
    await sleep(1000);
    const committed = await readCommitted(resources.output);
    collectViolations(violations, committed, options, deployment);
    const preparedLeft =
      options.postgresUrl === undefined
        ? []
        : await preparedTransactionsOf(options.postgresUrl, resources.sinkId);
    if (preparedLeft.length > 0)
      violations.push(`prepared transactions of the sink remain: ${preparedLeft.join(", ")}`);
    return {
      pipeline: `kafka-to-${options.sink}`,
      storage: options.storage,
      seed: options.seed,
      parallelisms: schedule.map((segment) => segment.parallelism),
      starts: schedule.map((segment) => segment.start),
      kills: counts.kills,
      platform: options.containers ? "containers" : "processes",
      networkPartitions: counts.networkPartitions,
      brokerKills: counts.brokerKills,
      faultEndings: countBy(deployment.faultEndings, (ending) => ending),
      rescaleStops: schedule.flatMap((segment) => (segment.stop ? [segment.stop] : [])),
      zombies: countBy(deployment.zombies, (zombie) => zombie.outcome ?? "survived"),
      crashes: countBy(deployment.crashes, (crash) => crash.errorCode ?? crash.ending),
      lateStores: deployment.lateStores,
      records: options.records,
      committed: committed.length,
      distinct: new Set(committed.map((record) => record.id)).size,
      preparedLeft,
      notes: deployment.notes,
      violations,
      durationMs: Date.now() - began,
    };
  } finally {
    for (const process of deployment.alive()) {
      await process.signal("SIGKILL").catch(() => undefined);
      await process.ended;
    }
    input?.stop();
    await input?.done.catch(() => undefined);
    await resources.remove().catch((error: unknown) => log(`  clean-up failed: ${String(error)}`));
  }
}

function collectViolations(
  violations: string[],
  committed: readonly ChaosRecord[],
  options: PerSubtaskChaosOptions,
  deployment: Deployment,
): void {
  try {
    checkExactlyOnceInOrder(committed, options.records, options.seed);
  } catch (error) {
    violations.push(error instanceof Error ? error.message : String(error));
  }
  // Kills and freezes are the only faults: a process that fails by itself (after its restart
  // strategy gave up, or with a permanent error) shows a bug even when the output is right.
  for (const crash of deployment.crashes)
    violations.push(`${crash.process} failed by itself: ${crash.ending}`);
  for (const zombie of deployment.zombies) {
    if (zombie.outcome === "survived")
      violations.push(`zombie ${zombie.process.name} did not end by itself after SIGCONT`);
    // It must stop because it was superseded or fenced, not because something else broke.
    else if (zombie.outcome === "failed" || zombie.outcome === "exited")
      violations.push(`zombie ${zombie.process.name} ended neither superseded nor fenced: ${zombie.ending}`);
  }
}
