// The job the Kubernetes example runs: orders from a Kafka topic upserted into a PostgreSQL table,
// exactly once, checkpoints in PostgreSQL. One pod of the StatefulSet runs one subtask:
//
//   onceflow run /app/job/job.mjs --subtask from-hostname --metrics-port 9464 --metrics-host 0.0.0.0
//
// The CLI calls createJob(launch) with launch = { subtaskIndex, metrics, restore } (from --subtask,
// --metrics-port and --restore); everything else comes from the environment (see settingsFrom), so the same file
// serves every pod and every parallelism. Plain JavaScript (ESM), so a ConfigMap can hold it as is.
import { Deserializers, KafkaSource } from "@onceflow/connector-kafka";
import { PostgresCheckpointStorage, PostgresSink } from "@onceflow/connector-postgres";
import { ConfigurationError, createConsoleLogger, Job } from "@onceflow/core";

/** How long a commit of the sink may wait for a row lock before it fails and is retried (ms). */
const LOCK_TIMEOUT_MS = 5_000;
/** Retries of a commit (the sink's commitRetry): 5 attempts, 100 ms doubling, at most 1.5 s of waiting. */
const COMMIT_RETRY = { maxAttempts: 5, initialDelay: 100, maxDelay: 10_000, multiplier: 2 };

/**
 * The job's settings, read from the environment (the StatefulSet sets them; the PostgreSQL URL
 * comes from a Secret). Throws a `CONFIGURATION` error that names the variable to fix.
 *
 * @param {Record<string, string | undefined>} env
 * @example
 * settingsFrom({ ONCEFLOW_PARALLELISM: "3", POSTGRES_URL: "postgresql://…", KAFKA_BROKERS: "kafka:9092" });
 */
export function settingsFrom(env = process.env) {
  return {
    jobId: env.ONCEFLOW_JOB_ID ?? "orders-to-postgres",
    // Must equal the StatefulSet's replicas: one pod per subtask.
    parallelism: whole(env, "ONCEFLOW_PARALLELISM", undefined, 1),
    postgresUrl: required(env, "POSTGRES_URL"),
    brokers: required(env, "KAFKA_BROKERS")
      .split(",")
      .map((broker) => broker.trim())
      .filter((broker) => broker.length > 0),
    topic: env.KAFKA_TOPIC ?? "orders",
    table: env.ORDERS_TABLE ?? "orders",
    checkpointIntervalMs: whole(env, "CHECKPOINT_INTERVAL_MS", 5_000, 100),
    checkpointTimeoutMs: whole(env, "CHECKPOINT_TIMEOUT_MS", 20_000, 1_000),
  };
}

/**
 * The longest a SIGTERM may take to end in a final checkpoint: the checkpoint in flight (at most
 * the checkpoint timeout), the final checkpoint (at most the timeout again), then the final
 * checkpoint's commit with its retries (each attempt at most the lock timeout). The pod's
 * terminationGracePeriodSeconds must be longer; past it the kubelet sends SIGKILL — nothing is lost
 * then (the next start restores the latest checkpoint), but the clean stop is.
 *
 * @param {ReturnType<typeof settingsFrom>} settings
 * @example
 * stopBudgetMs(settingsFrom()); // 2 × 20 000 + 5 × 5 000 + 1 500 = 66 500
 */
export function stopBudgetMs(settings) {
  let waits = 0;
  for (let attempt = 1, delay = COMMIT_RETRY.initialDelay; attempt < COMMIT_RETRY.maxAttempts; attempt++) {
    waits += Math.min(delay, COMMIT_RETRY.maxDelay);
    delay *= COMMIT_RETRY.multiplier;
  }
  return 2 * settings.checkpointTimeoutMs + COMMIT_RETRY.maxAttempts * LOCK_TIMEOUT_MS + waits;
}

/**
 * Builds the job. `launch` is what `onceflow run` hands over — `subtaskIndex` from `--subtask`,
 * `metrics` from `--metrics-port`, `restore` from `--restore` — and is spread into the job's options.
 *
 * @param {import("@onceflow/core").JobLaunchOptions} [launch]
 * @example
 * const job = createJob({ subtaskIndex: 2 });
 */
export function createJob(launch = {}) {
  const settings = settingsFrom();
  const job = new Job({
    jobId: settings.jobId,
    parallelism: settings.parallelism,
    checkpointing: {
      interval: settings.checkpointIntervalMs,
      timeout: settings.checkpointTimeoutMs,
      // Every pod stores and restores its checkpoints here: a pod needs no volume.
      storage: new PostgresCheckpointStorage({ connection: settings.postgresUrl }),
    },
    restartStrategy: { type: "exponential-delay", initialDelay: 1_000, maxDelay: 60_000, multiplier: 1.5 },
    logger: createConsoleLogger({ level: "info" }),
    ...launch,
  });
  job
    .fromSource(
      new KafkaSource({
        brokers: settings.brokers,
        topics: [settings.topic],
        groupId: settings.jobId,
        startingOffsets: "earliest",
        value: Deserializers.json(),
      }),
      { uid: "orders" },
    )
    .filter((record) => record.value !== null)
    .map((record) => record.value)
    .sinkTo(
      () =>
        new PostgresSink({
          connection: settings.postgresUrl,
          // Named, not derived (the default, <jobId>.<uid>, gets a hash suffix for the '-'): the id
          // in gids, markers and staging tables, and what `onceflow-postgres transactions` takes.
          sinkId: `${settings.jobId.replaceAll("-", "_")}.orders_table`,
          table: settings.table,
          columns: ["id", "version", "status", "amount_cents"],
          toRow: (order) => [order.id, order.version, order.status, order.amountCents],
          operation: { type: "upsert", conflictColumns: ["id"] },
          // Pinned, so that a change of the server's max_prepared_transactions cannot switch it
          // silently; use "staging" on a managed PostgreSQL without prepared transactions.
          mode: "prepared",
          lockTimeout: LOCK_TIMEOUT_MS,
          commitRetry: COMMIT_RETRY,
        }),
      { uid: "orders-table" },
    );
  return job;
}

/** @param {Record<string, string | undefined>} env @param {string} name */
function required(env, name) {
  const value = env[name];
  if (value === undefined || value.trim() === "") {
    throw new ConfigurationError(name, "is not set: the StatefulSet's container env must set it");
  }
  return value;
}

/**
 * @param {Record<string, string | undefined>} env @param {string} name
 * @param {number | undefined} fallback @param {number} minimum
 */
function whole(env, name, fallback, minimum) {
  const value = env[name];
  if (value === undefined || value === "") {
    if (fallback === undefined) {
      throw new ConfigurationError(name, "is not set: the StatefulSet's container env must set it");
    }
    return fallback;
  }
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(Number.isSafeInteger(parsed) && parsed >= minimum)) {
    throw new ConfigurationError(name, `must be a whole number ≥ ${minimum}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
