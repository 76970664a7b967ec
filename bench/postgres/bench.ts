/**
 * PostgresSink throughput against a plain COPY baseline, in one run on one server:
 *   (a) plain COPY in batches of BATCH rows, no guarantees
 *   (b) PostgresSink, exactly-once, prepared mode, checkpoints every second
 *   (c) PostgresSink, exactly-once, staging mode, checkpoints every second
 *
 *   ONCEFLOW_POSTGRES_URL=postgresql://postgres@127.0.0.1:55432/postgres npx tsx bench/postgres/bench.ts [rows]
 */

import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { PostgresSink, type PostgresSinkMode } from "@onceflow/connector-postgres";
import { GeneratorSource, Job } from "@onceflow/core";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";

const url = process.env.ONCEFLOW_POSTGRES_URL;
if (!url) throw new Error("set ONCEFLOW_POSTGRES_URL to a PostgreSQL with max_prepared_transactions > 0");
const ROWS = Number(process.argv[2] ?? 1_000_000);
const BATCH = 5000;
const tag = `${process.pid}_${Date.now().toString(36)}`;
const PAYLOAD = "x".repeat(100);

interface Row {
  id: number;
  key: string;
  payload: string;
}
const rowAt = (index: number): Row => ({
  id: index,
  key: `k${index % 10_000}`,
  payload: `${index}-${PAYLOAD}`.slice(0, 100),
});

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function createTable(name: string): Promise<void> {
  await withClient((c) =>
    c.query(`CREATE TABLE ${name} (id bigint NOT NULL, key text NOT NULL, payload text NOT NULL)`),
  );
}

async function count(name: string): Promise<number> {
  return withClient(async (c) => Number((await c.query(`SELECT count(*) AS n FROM ${name}`)).rows[0].n));
}

async function plainCopy(table: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const started = performance.now();
  for (let from = 0; from < ROWS; from += BATCH) {
    let text = "";
    for (let index = from; index < Math.min(ROWS, from + BATCH); index++) {
      const row = rowAt(index);
      text += `${row.id}\t${row.key}\t${row.payload}\n`;
    }
    await pipeline(
      Readable.from([text]),
      client.query(copyFrom(`COPY ${table} (id, key, payload) FROM STDIN`)),
    );
  }
  const seconds = (performance.now() - started) / 1000;
  await client.end();
  return seconds;
}

async function sinkJob(table: string, mode: PostgresSinkMode): Promise<number> {
  const job = new Job({
    jobId: `bench-${mode}-${tag}`.replace(/_/g, "-"),
    parallelism: 1,
    checkpointing: { interval: 1000, storage: "memory" },
    restartStrategy: { type: "none" },
  });
  job
    .fromSource(new GeneratorSource<Row>({ count: ROWS, generate: rowAt, batchSize: 1000 }), { uid: "in" })
    .sinkTo(
      new PostgresSink<Row>({
        connection: url as string,
        mode,
        table,
        columns: ["id", "key", "payload"],
        toRow: (row) => [row.id, row.key, row.payload],
        batchSize: BATCH,
      }),
      { uid: "out" },
    );
  const started = performance.now();
  const result = await job.execute();
  const seconds = (performance.now() - started) / 1000;
  process.stderr.write(`  ${mode}: ${result.lastCheckpointId} checkpoints\n`);
  return seconds;
}

const tables = { a: `bench_copy_${tag}`, b: `bench_prepared_${tag}`, c: `bench_staging_${tag}` };
for (const name of Object.values(tables)) await createTable(name);
try {
  const results: Array<[string, number]> = [];
  results.push(["(a) plain COPY, batches of 5000", await plainCopy(tables.a)]);
  results.push(["(b) PostgresSink prepared, exactly-once", await sinkJob(tables.b, "prepared")]);
  results.push(["(c) PostgresSink staging, exactly-once", await sinkJob(tables.c, "staging")]);
  for (const name of Object.values(tables)) {
    const n = await count(name);
    if (n !== ROWS) throw new Error(`${name} has ${n} rows, expected ${ROWS}`);
  }
  const base = ROWS / (results[0]?.[1] ?? 1);
  console.log(`rows: ${ROWS}, batch: ${BATCH}, checkpoint interval: 1000 ms`);
  console.log("| run | seconds | rows/s | ratio to (a) |");
  console.log("|---|---|---|---|");
  for (const [name, seconds] of results) {
    const rate = ROWS / seconds;
    console.log(
      `| ${name} | ${seconds.toFixed(2)} | ${Math.round(rate).toLocaleString("en-US")} | ${(rate / base).toFixed(2)} |`,
    );
  }
} finally {
  await withClient(async (c) => {
    for (const name of Object.values(tables)) await c.query(`DROP TABLE IF EXISTS ${name}`);
  });
}
