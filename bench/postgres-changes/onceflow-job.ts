/**
 * The onceflow candidate of bench.ts, as a child process: PostgresChangesSource on TABLE (no
 * initial snapshot) → each change as JSON, keyed by the row's id → KafkaSink into TOPIC, with
 * GUARANTEE (exactly-once or at-least-once), checkpoints every CHECKPOINT_MS in CHECKPOINT_DIR.
 * Environment: PG_URL, BROKERS, TOPIC, TABLE, JOB_ID, GUARANTEE, CHECKPOINT_MS, CHECKPOINT_DIR.
 */
import { KafkaSink } from "@onceflow/connector-kafka";
import { type PostgresChange, PostgresChangesSource } from "@onceflow/connector-postgres";
import { FileSystemCheckpointStorage, Job } from "@onceflow/core";

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
};

interface Message {
  readonly key: string;
  readonly value: string;
}

// bigint columns decode to bigint, which JSON has no form for: as decimal text.
const asJson = (change: PostgresChange) =>
  JSON.stringify(change, (_, value: unknown) => (typeof value === "bigint" ? value.toString() : value));

const guarantee = env("GUARANTEE") === "at-least-once" ? "at-least-once" : "exactly-once";
const job = new Job({
  jobId: env("JOB_ID"),
  parallelism: 1,
  checkpointing: {
    interval: Number(env("CHECKPOINT_MS")),
    storage: new FileSystemCheckpointStorage(env("CHECKPOINT_DIR")),
  },
});
job
  .fromSource(
    new PostgresChangesSource({ connection: env("PG_URL"), tables: [env("TABLE")], initialSnapshot: false }),
    { uid: "changes" },
  )
  .map((change): Message => ({ key: String(change.after?.id ?? change.before?.id), value: asJson(change) }))
  .sinkTo(
    new KafkaSink<Message>({
      brokers: env("BROKERS").split(","),
      topic: env("TOPIC"),
      key: { serialize: (message) => message.key },
      value: { serialize: (message) => message.value },
      deliveryGuarantee: guarantee,
      ...(guarantee === "exactly-once" ? { transactionalIdPrefix: `${env("JOB_ID")}-out` } : {}),
    }),
    { uid: "kafka-out" },
  );
process.stdout.write("STARTED\n");
await job.execute();
