/**
 * Kafka → PostgreSQL against a plain COPY of the same rows (issue 11, goal 3), in one run on one
 * broker and one server:
 *   (a) plain `COPY … FROM STDIN` of the rows held in memory, batches of 5000, no guarantees
 *   (b) a Job: KafkaSource (earliest → latest, bounded) → map → PostgresSink, exactly-once,
 *       prepared mode, checkpoints every 1000 ms on the filesystem
 *   (c) the same in staging mode
 *   (d) the same as (c) with backgroundCommits
 *   (r) the read side alone: the same KafkaSource → map → DiscardingSink, checkpoints as in (b)
 *   (e) (b) at parallelism 2, each subtask in a worker thread of this process (runSubtasksInThreads,
 *       the job in kafka-to-postgres-thread-job.mjs): two readers, two COPY connections
 *   (f) (c) at parallelism 2 in two threads, as (e)
 * The input (N records: key = the id, value = a 100-byte payload, 4 partitions) is written to a
 * fresh topic once; every round runs the chosen runs in rotated order, each on a fresh table, then
 * checks on a fresh connection that the table holds exactly N rows with N distinct ids in 0..N-1
 * ((r) checks off every id in memory instead).
 *
 * Rates: (a) is timed from its first COPY to its last; the jobs from the first record the map
 * sees to the end of `execute()`, i.e. until every row is committed ("busy"), and also over the
 * whole `execute()` including the Kafka and PostgreSQL connects ("wall").
 *
 *   npm run build -w @onceflow/core -w @onceflow/connector-kafka -w @onceflow/connector-postgres
 *   export ONCEFLOW_KAFKA_BROKERS=… ONCEFLOW_POSTGRES_URL=…   # a broker, and a PostgreSQL with max_prepared_transactions > 0
 *   npx tsx bench/postgres/kafka-to-postgres.ts --records 1000000 --rounds 3 [--runs a,b,c,d,r,e,f]
 * `--keep-topic` keeps the input topic and `--topic NAME` reads it again without writing it (for a
 * profile of one run: `node --cpu-prof --import tsx bench/postgres/kafka-to-postgres.ts --runs b …`).
 */

import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";
import { KafkaSource } from "@onceflow/connector-kafka";
import { PostgresSink, type PostgresSinkMode } from "@onceflow/connector-postgres";
import { createConsoleLogger, DiscardingSink, filesystem, Job, runSubtasksInThreads } from "@onceflow/core";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { createTopic, writeInput } from "../kafka/input-topic.js";
import { keyOf, payloadOf, withClient } from "./rows.js";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    rounds: { type: "string", default: "3" },
    partitions: { type: "string", default: "4" },
    /** Which runs, e.g. `b` alone for a profile of one prepared-mode job. */
    runs: { type: "string", default: "a,b,c,d,r,e,f" },
    /** Log the jobs' debug lines (checkpoints, commits) to standard error, with times. */
    log: { type: "boolean", default: false },
    /** Keep the input topic at the end (printed), to reuse with --topic. */
    "keep-topic": { type: "boolean", default: false },
    /** Read this topic, written by an earlier run with --keep-topic and the same --records: no seeding. */
    topic: { type: "string" },
  },
});
const brokerList = process.env.ONCEFLOW_KAFKA_BROKERS;
const url = process.env.ONCEFLOW_POSTGRES_URL ?? "";
if (!brokerList || !url) {
  const missing = [!brokerList && "ONCEFLOW_KAFKA_BROKERS", !url && "ONCEFLOW_POSTGRES_URL"].filter(Boolean);
  process.stderr.write(
    `kafka-to-postgres: set ${missing.join(" and ")} (a Kafka broker, and a PostgreSQL with max_prepared_transactions > 0)\n`,
  );
  process.exit(2);
}
const RECORDS = Number(args.records);
const ROUNDS = Number(args.rounds);
const PARTITIONS = Number(args.partitions);
if (!(Number.isInteger(RECORDS) && RECORDS > 0 && Number.isInteger(ROUNDS) && ROUNDS > 0)) {
  throw new Error("--records and --rounds must be positive integers");
}
const BATCH = 5000;
const brokers = brokerList.split(",");
const kafka = new Kafka({ brokers, clientId: "onceflow-bench-k2pg", logLevel: logLevel.NOTHING });
const tag = `${process.pid}_${Date.now().toString(36)}`;

/** A row of `(id bigint, key text, payload text)`, in column order. */
type Row = [id: number, key: string, payload: string];

/** Writes the input once: key = the id in decimal, value = its 100-byte payload, round-robin. */
async function seed(topic: string): Promise<void> {
  await createTopic(kafka, topic, PARTITIONS);
  await writeInput(kafka, topic, {
    count: RECORDS,
    partitions: PARTITIONS,
    message: (id) => ({ key: String(id), value: payloadOf(id) }),
  });
}

async function deleteTopic(topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic] });
  } finally {
    await admin.disconnect();
  }
}

/** Fails unless `table` holds exactly RECORDS rows with RECORDS distinct ids in 0..RECORDS-1. */
async function verify(table: string): Promise<void> {
  const result = await withClient(url, (c) =>
    c.query<{ n: string; ids: string; low: string | null; high: string | null }>(
      `SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS low, max(id) AS high FROM ${table}`,
    ),
  );
  const row = result.rows[0];
  const [n, ids, low, high] = [row?.n, row?.ids, row?.low, row?.high].map(Number);
  if (n !== RECORDS || ids !== RECORDS || low !== 0 || high !== RECORDS - 1) {
    throw new Error(
      `${table}: ${n} rows, ${ids} distinct ids in ${low}..${high}; expected ${RECORDS} rows, ids 0..${RECORDS - 1}`,
    );
  }
}

interface Timing {
  /** Seconds from the first row read (or sent, for COPY) until every row is committed. */
  busy: number;
  /** Seconds over the whole run, connects included (the same as `busy` for COPY). */
  wall: number;
  checkpoints: number;
}

/** (a): the same rows held in memory, COPY in batches of BATCH, one connection, no guarantees. */
async function plainCopy(table: string): Promise<Timing> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const started = performance.now();
    for (let from = 0; from < RECORDS; from += BATCH) {
      let text = "";
      for (let id = from; id < Math.min(RECORDS, from + BATCH); id++) {
        text += `${id}\t${keyOf(id)}\t${payloadOf(id)}\n`;
      }
      await pipeline(
        Readable.from([text]),
        client.query(copyFrom(`COPY ${table} (id, key, payload) FROM STDIN`)),
      );
    }
    const seconds = (performance.now() - started) / 1000;
    return { busy: seconds, wall: seconds, checkpoints: 0 };
  } finally {
    await client.end();
  }
}

/**
 * (b)–(d): KafkaSource → map to a row → PostgresSink, exactly-once, filesystem checkpoints.
 * (r), `mode` undefined: the same into a DiscardingSink, each id checked off once in memory.
 */
async function kafkaJob(
  table: string,
  topic: string,
  mode: PostgresSinkMode | undefined,
  backgroundCommits: boolean,
): Promise<Timing> {
  const directory = await mkdtemp(join(tmpdir(), "k2pg-"));
  try {
    const job = new Job({
      jobId: `k2pg-${table}`.replace(/_/g, "-"),
      parallelism: 1,
      checkpointing: { interval: 1000, storage: filesystem(directory) },
      restartStrategy: { type: "none" },
      ...(args.log ? { logger: createConsoleLogger({ level: "debug" }) } : {}),
    });
    let firstAt = 0;
    const seen = mode === undefined ? new Uint8Array(RECORDS) : undefined;
    let distinct = 0;
    const rows = job
      .fromSource(
        new KafkaSource({ brokers, topics: [topic], startingOffsets: "earliest", stoppingOffsets: "latest" }),
        { uid: "in" },
      )
      .map((record): Row => {
        if (firstAt === 0) {
          firstAt = performance.now();
          if (args.log) process.stderr.write(`${new Date().toISOString()} first record\n`);
        }
        const id = Number(record.key);
        if (seen !== undefined && seen[id] === 0) {
          seen[id] = 1;
          distinct++;
        }
        return [id, keyOf(id), record.value ?? ""];
      });
    if (mode === undefined) rows.sinkTo(new DiscardingSink<Row>(), { uid: "out" });
    else
      rows.sinkTo(
        () =>
          new PostgresSink<Row>({
            connection: url as string,
            mode,
            table,
            columns: ["id", "key", "payload"],
            batchSize: BATCH,
            backgroundCommits,
          }),
        { uid: "out" },
      );
    const started = performance.now();
    const result = await job.execute();
    const ended = performance.now();
    if (args.log) process.stderr.write(`${new Date().toISOString()} execute() resolved\n`);
    if (result.endedBy !== "end-of-input") throw new Error(`${table}: job ended by ${result.endedBy}`);
    if (seen !== undefined && distinct !== RECORDS) {
      throw new Error(`${table}: the discarding job saw ${distinct} distinct ids, expected ${RECORDS}`);
    }
    return {
      busy: (ended - firstAt) / 1000,
      wall: (ended - started) / 1000,
      checkpoints: result.lastCheckpointId,
    };
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/** FIRST_RECORD_CHANNEL of kafka-to-postgres-thread-job.mjs. */
const FIRST_RECORD_CHANNEL = "onceflow-bench-k2pg-first-record";

/** (e): (b) at `parallelism`, one worker thread per subtask; busy from the earliest first record. */
async function threadsJob(
  table: string,
  topic: string,
  mode: PostgresSinkMode,
  parallelism: number,
): Promise<Timing> {
  const directory = await mkdtemp(join(tmpdir(), "k2pg-"));
  let firstAt = Number.POSITIVE_INFINITY;
  const channel = new BroadcastChannel(FIRST_RECORD_CHANNEL);
  channel.onmessage = (event) => {
    firstAt = Math.min(firstAt, (event as { data: { firstAt: number } }).data.firstAt);
  };
  try {
    // Worker threads copy this environment when they start.
    Object.assign(process.env, {
      K2PG_JOB_ID: `k2pg-${table}`.replace(/_/g, "-"),
      K2PG_PARALLELISM: String(parallelism),
      K2PG_CHECKPOINTS: directory,
      K2PG_TOPIC: topic,
      K2PG_TABLE: table,
      K2PG_MODE: mode,
    });
    const started = Date.now();
    const threads = await runSubtasksInThreads({
      module: new URL("./kafka-to-postgres-thread-job.mjs", import.meta.url),
    });
    const { subtasks } = await threads.finished;
    const ended = Date.now();
    // Let the last first-record message arrive (it was posted long before the end).
    await new Promise((resolve) => setImmediate(resolve));
    const checkpoints = Math.max(...subtasks.map((s) => Number(s.lastCheckpointId ?? 0)));
    return { busy: (ended - firstAt) / 1000, wall: (ended - started) / 1000, checkpoints };
  } finally {
    channel.close();
    await rm(directory, { recursive: true, force: true });
  }
}

interface Run {
  letter: string;
  name: string;
  run: (table: string, topic: string) => Promise<Timing>;
}
const allRuns: Run[] = [
  { letter: "a", name: "(a) plain COPY, batches of 5000", run: (table) => plainCopy(table) },
  {
    letter: "b",
    name: "(b) Kafka → PostgresSink prepared, exactly-once",
    run: (table, topic) => kafkaJob(table, topic, "prepared", false),
  },
  {
    letter: "c",
    name: "(c) Kafka → PostgresSink staging, exactly-once",
    run: (table, topic) => kafkaJob(table, topic, "staging", false),
  },
  {
    letter: "d",
    name: "(d) Kafka → staging with backgroundCommits",
    run: (table, topic) => kafkaJob(table, topic, "staging", true),
  },
  {
    letter: "e",
    name: "(e) Kafka → PostgresSink prepared, parallelism 2 in 2 threads",
    run: (table, topic) => threadsJob(table, topic, "prepared", 2),
  },
  {
    letter: "f",
    name: "(f) Kafka → PostgresSink staging, parallelism 2 in 2 threads",
    run: (table, topic) => threadsJob(table, topic, "staging", 2),
  },
  {
    letter: "r",
    name: "(r) read side alone: Kafka → map → DiscardingSink",
    run: (table, topic) => kafkaJob(table, topic, undefined, false),
  },
];
const wanted = new Set((args.runs as string).split(","));
const runs = allRuns.filter((r) => wanted.has(r.letter));
if (runs.length === 0) throw new Error(`--runs ${args.runs}: choose among a,b,c,d,e,f,r`);

const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN;
const rate = (seconds: number) => Math.round(RECORDS / seconds);
const fmt = (value: number) => value.toLocaleString("en-US");

const topic = args.topic ?? `k2pg-${randomUUID().slice(0, 8)}`;
const timings = new Map<string, Timing[]>(runs.map((r) => [r.letter, []]));
const created: string[] = [];
if (args.topic === undefined) {
  const seedStarted = performance.now();
  await seed(topic);
  process.stderr.write(
    `${fmt(RECORDS)} records (key = id, value 100 bytes) written to ${topic} over ${PARTITIONS} partitions in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );
}
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = runs.map((_, i) => runs[(i + round) % runs.length] as Run);
    const line: string[] = [];
    for (const { letter, run } of order) {
      const table = `k2pg_${letter}_${round + 1}_${tag}`;
      created.push(table);
      const toTable = letter !== "r";
      if (toTable) {
        await withClient(url, (c) =>
          c.query(`CREATE TABLE ${table} (id bigint NOT NULL, key text NOT NULL, payload text NOT NULL)`),
        );
      }
      const timing = await run(table, topic);
      if (toTable) {
        await verify(table);
        await withClient(url, (c) => c.query(`DROP TABLE ${table}`));
      }
      timings.get(letter)?.push(timing);
      line.push(
        `${letter} ${fmt(rate(timing.busy))}${letter === "a" ? "" : ` (wall ${fmt(rate(timing.wall))}, ${timing.checkpoints} checkpoints)`}`,
      );
    }
    process.stderr.write(`round ${round + 1}: ${line.join(", ")} rows/s, verified\n`);
  }
  const base = timings.has("a") ? rate(median((timings.get("a") ?? []).map((t) => t.busy))) : Number.NaN;
  console.log(
    `records: ${fmt(RECORDS)}, partitions: ${PARTITIONS}, batch: ${BATCH}, checkpoint interval: 1000 ms (filesystem), medians of ${ROUNDS} rounds`,
  );
  console.log(
    "| run | busy s | rows/s (first record → all committed) | ratio to (a) | rows/s (wall) | ratio to (a) |",
  );
  console.log("|---|--:|--:|--:|--:|--:|");
  for (const { letter, name } of runs) {
    const list = timings.get(letter) ?? [];
    const busy = rate(median(list.map((t) => t.busy)));
    const wall = rate(median(list.map((t) => t.wall)));
    console.log(
      `| ${name} | ${median(list.map((t) => t.busy)).toFixed(2)} | ${fmt(busy)} | ${(busy / base).toFixed(2)} | ${fmt(wall)} | ${(wall / base).toFixed(2)} |`,
    );
  }
} finally {
  await withClient(url, async (c) => {
    for (const name of created) await c.query(`DROP TABLE IF EXISTS ${name}`);
  });
  if (args["keep-topic"] || args.topic !== undefined) process.stderr.write(`input topic kept: ${topic}\n`);
  else await deleteTopic(topic).catch(() => {});
}
