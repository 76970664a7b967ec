// Run: npx tsx examples/kafka-to-postgres/main.ts [--brokers host:port] [--postgres url]
//      (or ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL)
// Orders from a Kafka topic (key = order id, each change of an order a new version) upserted into a
// PostgreSQL table, exactly once: the rows of a checkpoint become visible together when it
// completes, and the table always holds each order once, at its latest version.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Deserializers, KafkaSource } from "@onceflow/connector-kafka";
import { PostgresSink, type PostgresSinkMode } from "@onceflow/connector-postgres";
import { createConsoleLogger, filesystem, Job, type JobResult } from "@onceflow/core";
import { createKafkaTopic } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";

/** One version of an order, as it travels through Kafka. */
export interface Order {
  readonly id: string;
  /** Grows with every change of the order. */
  readonly version: number;
  readonly status: string;
  readonly amountCents: number;
}

export interface KafkaToPostgresJobOptions {
  readonly brokers: string[];
  readonly topic: string;
  readonly postgresUrl: string;
  readonly table: string;
  /** Stable across restarts: checkpoints (and the sink's id) are found by it. */
  readonly jobId: string;
  readonly groupId: string;
  readonly checkpointDirectory: string;
  readonly checkpointInterval?: number;
  readonly parallelism?: number;
  /** `auto` (default) picks `prepared` when the server allows prepared transactions. */
  readonly mode?: PostgresSinkMode;
  /** Stop at the end offsets seen at start (a bounded run); else run until stopped. */
  readonly bounded?: boolean;
}

/** The target table: one row per order, the order id the primary key (the upsert's conflict target). */
export function createOrdersTableSql(table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${pg.escapeIdentifier(table)} (
    id text PRIMARY KEY,
    version integer NOT NULL,
    status text NOT NULL,
    amount_cents bigint NOT NULL
  )`;
}

/** Builds the job: KafkaSource (JSON orders) → PostgresSink upserting by order id. */
export function buildKafkaToPostgresJob(options: KafkaToPostgresJobOptions): Job {
  const job = new Job({
    jobId: options.jobId,
    parallelism: options.parallelism ?? 1,
    checkpointing: {
      interval: options.checkpointInterval ?? 5000,
      storage: filesystem(options.checkpointDirectory),
    },
    restartStrategy: { type: "none" },
    logger: createConsoleLogger({ level: "warn" }),
  });
  job
    .fromSource(
      new KafkaSource({
        brokers: options.brokers,
        topics: [options.topic],
        groupId: options.groupId,
        startingOffsets: "earliest",
        ...(options.bounded === false ? {} : { stoppingOffsets: "latest" as const }),
        value: Deserializers.json<Order>(),
      }),
      { uid: "orders" },
    )
    .filter((record) => record.value !== null)
    .map((record) => record.value as Order)
    .sinkTo(
      () =>
        new PostgresSink<Order>({
          connection: options.postgresUrl,
          table: options.table,
          columns: ["id", "version", "status", "amount_cents"],
          toRow: (order) => [order.id, order.version, order.status, order.amountCents],
          // Versions of one order share a key, so a partition, so they arrive in order: the last
          // record of a key wins within a checkpoint, and later checkpoints overwrite earlier ones.
          operation: { type: "upsert", conflictColumns: ["id"] },
          mode: options.mode ?? "auto",
        }),
      { uid: "orders-table" },
    );
  return job;
}

const STATUSES = ["created", "paid", "shipped", "delivered"];

/**
 * The example's input: `orders` orders, order i with 1 + (i mod 4) versions, the versions of
 * different orders interleaved (every version n of every order before any version n + 1).
 */
export function exampleOrders(orders = 50): Order[] {
  const versions: Order[] = [];
  for (let version = 1; version <= STATUSES.length; version++) {
    for (let index = 0; index < orders; index++) {
      if (version > 1 + (index % 4)) continue;
      versions.push({
        id: `order-${String(index).padStart(4, "0")}`,
        version,
        status: STATUSES[version - 1] as string,
        amountCents: 1000 + index * 10 + version,
      });
    }
  }
  return versions;
}

function client(brokers: string[]): Kafka {
  return new Kafka({ brokers, clientId: "kafka-to-postgres-example", logLevel: logLevel.NOTHING });
}

/** Creates the orders topic (3 partitions) and waits for its leaders. */
export async function createOrdersTopic(brokers: string[], topic: string): Promise<void> {
  await createKafkaTopic(brokers, topic, { partitions: 3 });
}

/** Writes the orders keyed by id (all versions of an order go to one partition, in order). */
export async function produceOrders(brokers: string[], topic: string, orders: Order[]): Promise<void> {
  const kafka = client(brokers);
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: orders.map((order) => ({ key: order.id, value: JSON.stringify(order) })),
    });
  } finally {
    await producer.disconnect();
  }
}

/** Runs one statement on a connection of its own. */
export async function query<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const connection = new pg.Client({ connectionString: url });
  await connection.connect();
  try {
    return (await connection.query<R>(text)).rows;
  } finally {
    await connection.end();
  }
}

export interface ExampleRun {
  readonly topic: string;
  readonly table: string;
  readonly orders: Order[];
  readonly result: JobResult;
}

/** Creates a fresh topic and table, writes the orders, runs the job bounded. */
export async function runKafkaToPostgresExample(
  brokers: string[],
  postgresUrl: string,
  orders = exampleOrders(),
): Promise<ExampleRun> {
  const suffix = randomBytes(4).toString("hex");
  const topic = `k2pg-example-orders-${suffix}`;
  const table = `k2pg_example_orders_${suffix}`;
  await query(postgresUrl, createOrdersTableSql(table));
  await createOrdersTopic(brokers, topic);
  await produceOrders(brokers, topic, orders);
  const checkpointDirectory = await mkdtemp(join(tmpdir(), "onceflow-k2pg-example-"));
  try {
    const job = buildKafkaToPostgresJob({
      brokers,
      topic,
      postgresUrl,
      table,
      jobId: `k2pg-example-${suffix}`,
      groupId: `k2pg-example-${suffix}`,
      checkpointDirectory,
      checkpointInterval: 500,
      parallelism: 2,
    });
    const result = await job.execute();
    return { topic, table, orders, result };
  } finally {
    await rm(checkpointDirectory, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { brokers: { type: "string" }, postgres: { type: "string" } } });
  const brokers = (values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS ?? "").split(",").filter(Boolean);
  const postgresUrl = values.postgres ?? process.env.ONCEFLOW_POSTGRES_URL ?? "";
  if (brokers.length === 0 || postgresUrl === "")
    throw new Error(
      "pass --brokers host:port and --postgres postgresql://… (or ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL; no services? `npx onceflow-testkit kafka` and `npx onceflow-testkit postgres` start them and print the lines)",
    );
  const run = await runKafkaToPostgresExample(brokers, postgresUrl);
  const rows = await query<{ id: string; version: number; status: string; amount_cents: string }>(
    postgresUrl,
    `SELECT id, version, status, amount_cents FROM ${pg.escapeIdentifier(run.table)} ORDER BY id`,
  );
  console.log(
    `${run.orders.length} order versions from ${run.topic} → ${rows.length} rows in ${run.table} (job ended by ${run.result.endedBy} after checkpoint ${run.result.lastCheckpointId})`,
  );
  for (const row of rows) console.log(`${row.id}\tv${row.version}\t${row.status}\t${row.amount_cents}`);
}
