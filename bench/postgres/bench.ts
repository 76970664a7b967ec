/**
 * PostgresSink throughput against a plain COPY baseline, in one run on one server:
 *   (a) plain COPY in batches of BATCH rows, no guarantees
 *   (b) PostgresSink, exactly-once, prepared mode, checkpoints every second
 *   (c) PostgresSink, exactly-once, staging mode, checkpoints every second (commits in the
 *       background by default: the move of checkpoint N overlaps writing N + 1)
 *   (d) the same as (c) with `backgroundCommits: false`: each move inline
 * Each round runs all four on fresh tables; the medians over the rounds are reported.
 *
 *   ONCEFLOW_POSTGRES_URL=postgresql://postgres@127.0.0.1:55432/postgres npx tsx bench/postgres/bench.ts [rows] [rounds]
 */

import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { PostgresSink, type PostgresSinkMode } from "@onceflow/connector-postgres";
import { GeneratorSource, Job } from "@onceflow/core";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { keyOf, payloadOf, withClient } from "./rows.js";

const url = process.env.ONCEFLOW_POSTGRES_URL ?? "";
if (!url) throw new Error("set ONCEFLOW_POSTGRES_URL to a PostgreSQL with max_prepared_transactions > 0");
const ROWS = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const BATCH = 5000;
const tag = `${process.pid}_${Date.now().toString(36)}`;

interface Row {
  id: number;
  key: string;
  payload: string;
}
const rowAt = (index: number): Row => ({
  id: index,
  key: keyOf(index),
  payload: payloadOf(index),
});

async function createTable(name: string): Promise<void> {
  await withClient(url, (c) =>
    c.query(`CREATE TABLE ${name} (id bigint NOT NULL, key text NOT NULL, payload text NOT NULL)`),
  );
}

async function count(name: string): Promise<number> {
  return withClient(url, async (c) => Number((await c.query(`SELECT count(*) AS n FROM ${name}`)).rows[0].n));
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

/** `backgroundCommits` undefined: the sink's default for the mode. */
async function sinkJob(table: string, mode: PostgresSinkMode, backgroundCommits?: boolean): Promise<number> {
  const job = new Job({
    jobId: `bench-${table}`.replace(/_/g, "-"),
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
        ...(backgroundCommits === undefined ? {} : { backgroundCommits }),
      }),
      { uid: "out" },
    );
  const started = performance.now();
  await job.execute();
  return (performance.now() - started) / 1000;
}

const runs: Array<{ name: string; run: (table: string) => Promise<number> }> = [
  { name: "(a) plain COPY, batches of 5000", run: plainCopy },
  { name: "(b) PostgresSink prepared, exactly-once", run: (table) => sinkJob(table, "prepared") },
  { name: "(c) PostgresSink staging, exactly-once", run: (table) => sinkJob(table, "staging") },
  {
    name: "(d) staging, commits inline (backgroundCommits: false)",
    run: (table) => sinkJob(table, "staging", false),
  },
];
const seconds: number[][] = runs.map(() => []);
const created: string[] = [];
const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN;
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const line: string[] = [];
    for (const [index, { run }] of runs.entries()) {
      const table = `bench_${"abcd"[index]}_${round}_${tag}`;
      created.push(table);
      await createTable(table);
      const took = await run(table);
      const n = await count(table);
      if (n !== ROWS) throw new Error(`${table} has ${n} rows, expected ${ROWS}`);
      await withClient(url, (c) => c.query(`DROP TABLE ${table}`));
      seconds[index]?.push(took);
      line.push(`${"abcd"[index]} ${Math.round(ROWS / took).toLocaleString("en-US")}`);
    }
    process.stderr.write(`round ${round}: ${line.join(", ")} rows/s\n`);
  }
  const base = ROWS / median(seconds[0] ?? []);
  console.log(`rows: ${ROWS}, batch: ${BATCH}, checkpoint interval: 1000 ms, medians of ${ROUNDS} rounds`);
  console.log("| run | seconds | rows/s | ratio to (a) |");
  console.log("|---|---|---|---|");
  for (const [index, { name }] of runs.entries()) {
    const rate = ROWS / median(seconds[index] ?? []);
    console.log(
      `| ${name} | ${median(seconds[index] ?? []).toFixed(2)} | ${Math.round(rate).toLocaleString("en-US")} | ${(rate / base).toFixed(2)} |`,
    );
  }
} finally {
  await withClient(url, async (c) => {
    for (const name of created) await c.query(`DROP TABLE IF EXISTS ${name}`);
  });
}
