import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JobResult } from "@onceflow/core";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  sharedKafkaBrokers as kafkaBrokers,
  sharedPostgresUrl as postgresUrl,
} from "../../test/chaos/kafka-services.js";
import {
  buildKafkaToPostgresJob,
  createOrdersTableSql,
  createOrdersTopic,
  exampleOrders,
  type Order,
  produceOrders,
  runKafkaToPostgresExample,
} from "./main.js";

interface Row {
  id: string;
  version: number;
  status: string;
  amount_cents: string;
}

/** Runs one statement on a fresh connection (never one of the sink's). */
async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

/** The latest version of each order, computed here from the input. */
function latest(orders: Order[]): Map<string, Order> {
  const byId = new Map<string, Order>();
  for (const order of orders)
    if ((byId.get(order.id)?.version ?? 0) < order.version) byId.set(order.id, order);
  return byId;
}

function expectTable(rows: Row[], orders: Order[]): void {
  const expected = latest(orders);
  // The primary key makes a doubled order impossible; the count catches a missing one.
  expect(rows.length).toBe(expected.size);
  for (const row of rows) {
    const order = expected.get(row.id);
    expect(order, `unexpected order ${row.id}`).toBeDefined();
    expect({ version: row.version, status: row.status, amount: Number(row.amount_cents) }).toEqual({
      version: order?.version,
      status: order?.status,
      amount: order?.amountCents,
    });
  }
}

describe("examples/kafka-to-postgres", () => {
  it("upserts every order once, at its latest version", { timeout: 40_000 }, async () => {
    const url = postgresUrl();
    const run = await runKafkaToPostgresExample(kafkaBrokers(), url, exampleOrders(80));
    expect(run.result.endedBy).toBe("end-of-input");
    const rows = await sql<Row>(url, `SELECT * FROM ${pg.escapeIdentifier(run.table)}`);
    expectTable(rows, run.orders);
    await sql(url, `DROP TABLE ${pg.escapeIdentifier(run.table)}`);
  });

  it("a streaming run overwrites orders with versions that arrive checkpoints later", {
    timeout: 40_000,
  }, async () => {
    const brokers = kafkaBrokers();
    const url = postgresUrl();
    const suffix = randomBytes(4).toString("hex");
    const topic = `k2pg-test-orders-${suffix}`;
    const table = `k2pg_test_orders_${suffix}`;
    await sql(url, createOrdersTableSql(table));
    await createOrdersTopic(brokers, topic);
    const all = exampleOrders(60);
    const first = all.filter((order) => order.version <= 2);
    const checkpointDirectory = await mkdtemp(join(tmpdir(), "onceflow-k2pg-test-"));
    const job = buildKafkaToPostgresJob({
      brokers,
      topic,
      postgresUrl: url,
      table,
      jobId: `k2pg-test-${suffix}`,
      groupId: `k2pg-test-${suffix}`,
      checkpointDirectory,
      checkpointInterval: 200,
      parallelism: 2,
      bounded: false,
    });
    const read = () => sql<Row>(url, `SELECT * FROM ${pg.escapeIdentifier(table)}`);
    // Polls the table (only committed rows are visible) until it holds `orders`' latest versions.
    const settled = async (orders: Order[]) => {
      const want = latest(orders);
      for (let attempt = 0; attempt < 150; attempt++) {
        const rows = await read();
        if (rows.length === want.size && rows.every((row) => row.version === want.get(row.id)?.version))
          return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    let running: Promise<JobResult> | undefined;
    try {
      await produceOrders(brokers, topic, first);
      running = job.execute();
      await settled(first);
      expectTable(await read(), first);
      await produceOrders(
        brokers,
        topic,
        all.filter((order) => order.version > 2),
      );
      await settled(all);
      job.stop();
      expect((await running).endedBy).toBe("stop");
      expectTable(await read(), all);
    } finally {
      // Never leave a running job behind a failed assertion.
      job.stop();
      await running?.catch(() => undefined);
      await rm(checkpointDirectory, { recursive: true, force: true });
      await sql(url, `DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    }
  });
});
