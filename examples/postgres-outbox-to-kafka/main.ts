// Run: npx tsx examples/postgres-outbox-to-kafka/main.ts [--brokers host:port] [--postgres url]
//      (or ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL; the server needs wal_level=logical)
// The transactional outbox: the application writes its events into an `outbox` table in the same
// transactions as its business rows; this job streams the outbox's inserts (logical replication)
// into a Kafka topic, keyed by aggregate, exactly once and in commit order per key.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KafkaSink } from "@onceflow/connector-kafka";
import { type PostgresChange, PostgresChangesSource } from "@onceflow/connector-postgres";
import { filesystem, Job, type JobResult } from "@onceflow/core";
import { type CommittedKafkaRecord, createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import pg from "pg";

/** One Kafka record made from an outbox row. */
export interface OutboxMessage {
  readonly key: string;
  readonly value: string;
}

export interface OutboxJobOptions {
  readonly postgresUrl: string;
  readonly outboxTable: string;
  readonly brokers: string[];
  readonly topic: string;
  /** Stable across restarts: checkpoints, the replication slot and the publication are named by it. */
  readonly jobId: string;
  readonly checkpointDirectory: string;
  readonly checkpointInterval?: number;
}

/** An outbox row's insert → the Kafka record: key = aggregate id, value = the event. */
export function toOutboxMessage(change: PostgresChange): OutboxMessage {
  const row = change.after ?? {};
  return {
    key: String(row.aggregate_id),
    value: JSON.stringify({
      id: String(row.id),
      type: row.event_type,
      payload: row.payload,
      committedAt: change.commitTime,
    }),
  };
}

/** The job: outbox inserts → exactly-once KafkaSink. */
export function buildOutboxJob(options: OutboxJobOptions): Job {
  const job = new Job({
    jobId: options.jobId,
    checkpointing: {
      interval: options.checkpointInterval ?? 500,
      storage: filesystem(options.checkpointDirectory),
    },
  });
  job
    .fromSource(
      // No initial snapshot: the outbox holds events, not state; what was there before the job is not sent.
      new PostgresChangesSource({
        connection: options.postgresUrl,
        tables: [options.outboxTable],
        initialSnapshot: false,
      }),
      { uid: "outbox-changes" },
    )
    .filter((change) => change.kind === "insert")
    .map(toOutboxMessage)
    .sinkTo(
      () =>
        new KafkaSink<OutboxMessage>({
          brokers: options.brokers,
          topic: options.topic,
          key: { serialize: (message) => message.key },
          value: { serialize: (message) => message.value },
          deliveryGuarantee: "exactly-once",
          transactionalIdPrefix: `${options.jobId}-kafka`,
        }),
      { uid: "to-kafka" },
    );
  return job;
}

async function sql(url: string, text: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text, values);
  } finally {
    await client.end();
  }
}

/**
 * Creates an outbox table and a topic, starts the job, writes `transactions` application
 * transactions of 1–3 events each for 10 orders, waits until Kafka has them all, stops the job
 * (final checkpoint) and retires its slot and publication.
 */
export async function runOutboxExample(
  brokers: string[],
  postgresUrl: string,
  transactions = 20,
): Promise<{ topic: string; events: number; records: CommittedKafkaRecord[]; result: JobResult }> {
  const suffix = randomBytes(4).toString("hex");
  const topic = `outbox-example-${suffix}`;
  const outboxTable = `outbox_example_${suffix}`;
  const jobId = `outbox-example-${suffix}`;
  await createKafkaTopic(brokers, topic, { partitions: 3 });
  await sql(
    postgresUrl,
    `CREATE TABLE ${outboxTable} (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL)`,
  );
  const checkpointDirectory = await mkdtemp(join(tmpdir(), "outbox-example-"));
  const job = buildOutboxJob({ postgresUrl, outboxTable, brokers, topic, jobId, checkpointDirectory });
  const running = job.execute();
  try {
    // The slot exists once the first checkpoint completed; from then on no committed event is missed.
    await waitFor(async () => (await slotConfirmed(postgresUrl, jobId)) === true);
    const client = new pg.Client({ connectionString: postgresUrl });
    await client.connect();
    let events = 0;
    try {
      for (let t = 0; t < transactions; t++) {
        await client.query("BEGIN");
        for (let e = 0; e <= t % 3; e++) {
          await client.query(
            `INSERT INTO ${outboxTable} (aggregate_id, event_type, payload) VALUES ($1, $2, $3)`,
            [`order-${t % 10}`, e === 0 ? "OrderPlaced" : "OrderChanged", { transaction: t, event: e }],
          );
          events += 1;
        }
        await client.query("COMMIT");
      }
    } finally {
      await client.end();
    }
    let records: CommittedKafkaRecord[] = [];
    await waitFor(async () => {
      records = await readCommittedKafkaRecords(brokers, topic, { isolation: "read_committed" });
      return records.length >= events;
    });
    job.stop();
    const result = await running;
    return { topic, events, records, result };
  } finally {
    job.stop();
    await running.catch(() => undefined);
    // Retire the job: a slot left behind would make the server keep WAL forever.
    const slot = `onceflow_${jobId.replace(/-/g, "_")}`;
    // The walsender may still be ending after the job closed its connection: the slot is active until then.
    await waitFor(async () => {
      try {
        await sql(
          postgresUrl,
          "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
          [slot],
        );
        return true;
      } catch {
        return false;
      }
    }, 10_000);
    await sql(postgresUrl, `DROP PUBLICATION IF EXISTS ${slot}`);
    await sql(postgresUrl, `DROP TABLE IF EXISTS ${outboxTable}`);
    await rm(checkpointDirectory, { recursive: true, force: true });
  }
}

async function slotConfirmed(url: string, jobId: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ confirmed: boolean }>(
      "SELECT confirmed_flush_lsn IS NOT NULL AS confirmed FROM pg_replication_slots WHERE slot_name = $1",
      [`onceflow_${jobId.replace(/-/g, "_")}`],
    );
    return result.rows[0]?.confirmed === true;
  } finally {
    await client.end();
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not done within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { brokers: { type: "string" }, postgres: { type: "string" } } });
  const brokers = (values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS ?? "").split(",").filter(Boolean);
  const postgresUrl = values.postgres ?? process.env.ONCEFLOW_POSTGRES_URL ?? "";
  if (brokers.length === 0 || postgresUrl === "")
    throw new Error(
      "pass --brokers host:port and --postgres postgresql://… (or ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL)",
    );
  const run = await runOutboxExample(brokers, postgresUrl);
  console.log(
    `${run.events} outbox events → ${run.records.length} records in ${run.topic} (job ended by ${run.result.endedBy})`,
  );
  for (const record of run.records)
    console.log(`p${record.partition}@${record.offset}\t${record.key}\t${record.value}`);
}
