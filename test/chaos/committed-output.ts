import { readCommittedKafkaRecords } from "@onceflow/testkit";
import pg from "pg";
import type { ChaosRecord } from "./fixtures/chaos-record.js";

// The independent reader of what a chaos job committed: raw read_committed Fetch requests for a
// Kafka topic, a fresh SQL connection for a PostgreSQL table. Never the job's own code paths.

/** Where the output went: a Kafka topic, or a PostgreSQL table. */
export type ChaosOutput =
  | { readonly sink: "kafka"; readonly brokers: readonly string[]; readonly topic: string }
  | { readonly sink: "postgres"; readonly postgresUrl: string; readonly table: string };

/** Runs `work` on a fresh connection, closed afterwards. */
export async function withPostgres<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * What the sink committed, in the order a reader sees it per key: the JSON values of the topic, or
 * the table's rows as `SELECT <select>` gives them (by default the chaos record's columns).
 */
export async function readCommitted<T = ChaosRecord>(
  output: ChaosOutput,
  select = "id, key, seq",
): Promise<T[]> {
  if (output.sink === "kafka") {
    const records = await readCommittedKafkaRecords([...output.brokers], output.topic);
    return records.map((record) => JSON.parse(record.value ?? "null") as T);
  }
  // `pos` is a bigserial: the order rows were inserted (and a key's rows come from one subtask).
  return withPostgres(output.postgresUrl, async (client) => {
    const result = await client.query(
      `SELECT ${select} FROM ${pg.escapeIdentifier(output.table)} ORDER BY pos`,
    );
    return result.rows as T[];
  });
}

/** Gids of prepared transactions whose gid starts with `<sinkId>-` (the sink's, in any database). */
export async function preparedTransactionsOf(postgresUrl: string, sinkId: string): Promise<string[]> {
  return withPostgres(postgresUrl, async (client) => {
    const result = await client.query<{ gid: string }>(
      "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1 ORDER BY gid",
      [`${sinkId}-`],
    );
    return result.rows.map((row) => row.gid);
  });
}
