/**
 * Kafka → PostgreSQL against a plain COPY of the same rows, in one run on one
 * broker and one server:
 *   (a) plain `COPY … FROM STDIN` of the rows held in memory, batches of 5000, no guarantees
 *   (b) a Job: KafkaSource (earliest → latest, bounded) → map → PostgresSink, exactly-once,
 *       prepared mode, checkpoints every 1000 ms on the filesystem
 *   (c) the same in staging mode (whose commits run in the background by default: the move of
 *       checkpoint N overlaps writing N + 1)
 *   (d) the same as (c) with `backgroundCommits: false`: each move inline, records wait for it
 *   (b50), (c50) (b) and (c) with checkpoints every 50 ms instead of 1000 (what the interval costs)
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
 * CPU, per run over the same busy window (readers in bench/process-cpu.ts; Linux, the broker and
 * the server on this machine): the counters are read every 100 ms and at the window's ends where
 * this process sees them (a–d, r; the start of e and f is a worker thread's first record, so there
 * the readings around it are interpolated), and the readings at the start are subtracted from
 * those at the end. Columns, medians over the rounds:
 *   Node CPU-s / 1M        this process, all its threads (process.cpuUsage(): the worker threads of
 *                          e and f, V8's and libuv's helpers, and these readings themselves)
 *   PostgreSQL CPU-s / 1M  the server: the postmaster (pid from `<data_directory>/postmaster.pid`,
 *                          `SHOW data_directory`) with utime + stime + cutime + cstime (cutime and
 *                          cstime: its children that exited, e.g. closed connections) plus utime +
 *                          stime of its live children (backends, checkpointer, autovacuum …). Empty,
 *                          with a note, when the file cannot be read or the pid is not a postgres here.
 *   broker CPU-s / 1M      the process listening on the first broker's port (`ss -ltnp`), or
 *                          --broker-pid
 *   busiest thread         the one thread (of this process or the broker) or PostgreSQL process (one
 *                          thread each) that used the most CPU in the window, and which. A thread that
 *                          ended inside the window counts up to its last reading.
 *   machine busy %         busy jiffies of all CPUs (/proc/stat) / (cores × the window)
 *   CPU bound              the shortest busy time these CPU costs allow on this machine: the floor
 *                          max((Node + PostgreSQL + broker CPU-s) / cores, busiest thread CPU-s) (a
 *                          thread runs on one core at a time), the median over the rounds, shown in
 *                          parentheses; and the best ratio to (a) it allows: (a)'s median busy
 *                          seconds / that floor. The floor leaves out what else runs on the machine
 *                          (compare machine busy % with the three processes' share) and all waiting
 *                          (commits, checkpoint barriers, round trips): a run can take longer than
 *                          its floor, not less (up to 10 ms jiffies and the interpolation). (a)'s own
 *                          ratio above 1.00 says how far (a) is from its floor: it waits too, for
 *                          each COPY before it builds the next batch.
 *
 *   npm run build -w @onceflow/core -w @onceflow/connector-kafka -w @onceflow/connector-postgres
 *   export ONCEFLOW_KAFKA_BROKERS=… ONCEFLOW_POSTGRES_URL=…   # a broker, and a PostgreSQL with max_prepared_transactions > 0
 *   npx tsx bench/postgres/kafka-to-postgres.ts --records 1000000 --rounds 3 [--runs a,b,c,d,r,e,f,b50,c50]
 * `--keep-topic` keeps the input topic and `--topic NAME` reads it again without writing it (for a
 * profile of one run: `node --cpu-prof --import tsx bench/postgres/kafka-to-postgres.ts --runs b …`);
 * `--broker-pid PID` names the broker's process when `ss` cannot find it.
 */

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
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
import {
  brokerPid,
  CLOCK_TICKS_PER_SECOND,
  CORES,
  commandOf,
  cpuSecondsIfAlive,
  machineJiffies,
  processTreeCpuSeconds,
  type ThreadCpu,
  threadCpuSeconds,
} from "../process-cpu.js";
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
    /** The broker's pid, when `ss -ltnp` cannot find the process listening on its port. */
    "broker-pid": { type: "string" },
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
  /** The busy window in Date.now() milliseconds: the CPU columns are measured over it. */
  window: { from: number; to: number };
}

/** The PostgreSQL server's postmaster pid, from `<data_directory>/postmaster.pid`; undefined, with a note, if unknown. */
async function postmasterPid(): Promise<number | undefined> {
  let file = "<data_directory>/postmaster.pid";
  try {
    const { rows } = await withClient(url, (c) => c.query<{ data_directory: string }>("SHOW data_directory"));
    file = join(rows[0]?.data_directory ?? "", "postmaster.pid");
    const pid = Number(readFileSync(file, "utf8").split("\n", 1)[0]);
    const command = Number.isInteger(pid) && pid > 0 ? commandOf(pid) : undefined;
    if (command === undefined || !/^(postgres|postmaster)/.test(command)) {
      throw new Error(
        `pid ${pid} is not a PostgreSQL process on this machine (${command ?? "no such process"})`,
      );
    }
    return pid;
  } catch (error) {
    process.stderr.write(
      `kafka-to-postgres: the PostgreSQL CPU column stays empty, ${file}: ${(error as Error).message}\n`,
    );
    return undefined;
  }
}
const POSTMASTER_PID = await postmasterPid();
const BROKER_PID = brokerPid(brokers, args["broker-pid"]);
if (cpuSecondsIfAlive(BROKER_PID) === undefined) {
  process.stderr.write(
    `kafka-to-postgres: the broker CPU column stays empty: ${BROKER_PID === undefined ? `no process found listening on ${brokers[0]}` : `no process ${BROKER_PID}`} (--broker-pid)\n`,
  );
}
/** How often the CPU counters are read while a run runs (besides at the window's ends, where known). */
const SAMPLE_MS = 100;

/** One reading of the CPU counters (seconds used so far), at `at` (Date.now() milliseconds). */
interface CpuSample {
  at: number;
  /** This process, all its threads: process.cpuUsage(). */
  node: number;
  /** The PostgreSQL server: the postmaster with its exited and live children. */
  postgres: number | undefined;
  broker: number | undefined;
  /** Busy seconds of all CPUs together (/proc/stat). */
  machine: number;
  /** Each thread of this process and of the broker, and each PostgreSQL process, by a key. */
  threads: Map<string, number>;
}

/** What a run used over its window. */
interface CpuUsage {
  node: number;
  postgres: number | undefined;
  broker: number | undefined;
  /** Busy jiffies of all CPUs / (cores × the window), in %. */
  machineBusyPercent: number;
  /** The thread (or PostgreSQL process) that used the most CPU in the window, and how much. */
  busiest: { label: string; seconds: number } | undefined;
}

/**
 * What a PostgreSQL server process is, from its process title (/proc/<pid>/cmdline): "backend" for
 * a connection's process (`postgres: user db host(port) state` or `… [local] …`), else its title,
 * e.g. "checkpointer".
 */
function postgresRole(pid: number): string {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    return /\(\d+\)|\[local\]/.test(title) ? "backend" : title.replace(/^postgres:\s*/, "");
  } catch {
    return "process";
  }
}

/** A thread's label in the table, by its key in CpuSample.threads. */
const threadLabels = new Map<string, string>();

/** The value at `at`, linear between the readings around it; the first or last reading outside them. */
function valueAt(times: number[], values: number[], at: number): number {
  const after = times.findIndex((t) => t >= at);
  if (after === 0) return values[0] as number;
  if (after === -1) return values.at(-1) as number;
  const [t0, t1, v0, v1] = [times[after - 1], times[after], values[after - 1], values[after]] as number[];
  return t1 === t0
    ? (v1 as number)
    : (v0 as number) +
        (((v1 as number) - (v0 as number)) * (at - (t0 as number))) / ((t1 as number) - (t0 as number));
}

/** Reads the CPU counters every SAMPLE_MS from its creation until stop(), and on sample(). */
class CpuSampler {
  readonly #samples: CpuSample[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.sample();
    this.#timer = setInterval(() => this.sample(), SAMPLE_MS);
  }

  /** Takes a reading now; returns its time, for a window's end. */
  sample(): number {
    const threads = new Map<string, number>();
    const add = (kind: string, id: number, thread: ThreadCpu, label: () => string) => {
      const key = `${kind}:${id}`;
      threads.set(key, thread.seconds);
      if (!threadLabels.has(key)) threadLabels.set(key, label());
    };
    for (const [tid, thread] of threadCpuSeconds("self")) {
      // Node 20 names all its threads "node" (worker threads, V8's and libuv's helpers): only the
      // main thread is told apart. In e and f a busiest "Node thread <tid>" near 1 CPU-s is a worker.
      add("node", tid, thread, () =>
        tid === process.pid
          ? "Node main thread"
          : `Node thread ${tid}${thread.command === "node" ? "" : ` (${thread.command})`}`,
      );
    }
    let postgres: number | undefined;
    if (POSTMASTER_PID !== undefined) {
      const processes = new Map<number, ThreadCpu>();
      try {
        postgres = processTreeCpuSeconds(POSTMASTER_PID, processes);
      } catch {
        postgres = undefined;
      }
      for (const [pid, thread] of processes) {
        add("pg", pid, thread, () =>
          pid === POSTMASTER_PID ? "PostgreSQL postmaster" : `PostgreSQL ${postgresRole(pid)} ${pid}`,
        );
      }
    }
    if (BROKER_PID !== undefined) {
      for (const [tid, thread] of threadCpuSeconds(BROKER_PID))
        add("broker", tid, thread, () => `broker thread ${thread.command}`);
    }
    const cpu = process.cpuUsage();
    const at = Date.now();
    this.#samples.push({
      at,
      node: (cpu.user + cpu.system) / 1e6,
      postgres,
      broker: cpuSecondsIfAlive(BROKER_PID),
      machine: machineJiffies().busy / CLOCK_TICKS_PER_SECOND,
      threads,
    });
    return at;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** What was used from `from` to `to`, each counter interpolated between the readings around them. */
  between(from: number, to: number): CpuUsage {
    const used = (field: "node" | "postgres" | "broker" | "machine") => {
      const usable = this.#samples.filter((s) => s[field] !== undefined);
      if (usable.length === 0) return undefined;
      const times = usable.map((s) => s.at);
      const values = usable.map((s) => s[field] as number);
      return valueAt(times, values, to) - valueAt(times, values, from);
    };
    // A thread is at 0 in the reading before its first one (it started in between) and keeps its
    // last reading after it ended (what it used in its last interval is lost).
    const times = this.#samples.map((s) => s.at);
    let busiest: CpuUsage["busiest"];
    for (const key of new Set(this.#samples.flatMap((s) => [...s.threads.keys()]))) {
      let last = 0;
      const values = this.#samples.map((s) => {
        last = s.threads.get(key) ?? last;
        return last;
      });
      const seconds = valueAt(times, values, to) - valueAt(times, values, from);
      if (busiest === undefined || seconds > busiest.seconds) {
        busiest = { label: threadLabels.get(key) ?? key, seconds };
      }
    }
    const wall = Math.max(0.001, (to - from) / 1000);
    return {
      node: used("node") as number,
      postgres: used("postgres"),
      broker: used("broker"),
      machineBusyPercent: (100 * (used("machine") as number)) / (CORES * wall),
      busiest,
    };
  }
}

/** (a): the same rows held in memory, COPY in batches of BATCH, one connection, no guarantees. */
async function plainCopy(table: string, cpu: CpuSampler): Promise<Timing> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const windowFrom = cpu.sample();
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
    return { busy: seconds, wall: seconds, checkpoints: 0, window: { from: windowFrom, to: cpu.sample() } };
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
  /** `undefined`: the sink's default for the mode. */
  backgroundCommits: boolean | undefined,
  cpu: CpuSampler,
  /** The checkpoint interval (ms). */
  interval = 1000,
): Promise<Timing> {
  const directory = await mkdtemp(join(tmpdir(), "k2pg-"));
  try {
    const job = new Job({
      jobId: `k2pg-${table}`.replace(/_/g, "-"),
      parallelism: 1,
      checkpointing: { interval, storage: filesystem(directory) },
      restartStrategy: { type: "none" },
      ...(args.log ? { logger: createConsoleLogger({ level: "debug" }) } : {}),
    });
    let firstAt = 0;
    let windowFrom = 0;
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
          windowFrom = cpu.sample();
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
            ...(backgroundCommits === undefined ? {} : { backgroundCommits }),
          }),
        { uid: "out" },
      );
    const started = performance.now();
    const result = await job.execute();
    const ended = performance.now();
    const windowTo = cpu.sample();
    if (args.log) process.stderr.write(`${new Date().toISOString()} execute() resolved\n`);
    if (result.endedBy !== "end-of-input") throw new Error(`${table}: job ended by ${result.endedBy}`);
    if (seen !== undefined && distinct !== RECORDS) {
      throw new Error(`${table}: the discarding job saw ${distinct} distinct ids, expected ${RECORDS}`);
    }
    return {
      busy: (ended - firstAt) / 1000,
      wall: (ended - started) / 1000,
      checkpoints: result.lastCheckpointId,
      window: { from: windowFrom, to: windowTo },
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
  cpu: CpuSampler,
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
    const windowTo = cpu.sample();
    // Let the last first-record message arrive (it was posted long before the end).
    await new Promise((resolve) => setImmediate(resolve));
    const checkpoints = Math.max(...subtasks.map((s) => Number(s.lastCheckpointId ?? 0)));
    return {
      busy: (ended - firstAt) / 1000,
      wall: (ended - started) / 1000,
      checkpoints,
      window: { from: firstAt, to: windowTo },
    };
  } finally {
    channel.close();
    await rm(directory, { recursive: true, force: true });
  }
}

interface Run {
  letter: string;
  name: string;
  run: (table: string, topic: string, cpu: CpuSampler) => Promise<Timing>;
}
const allRuns: Run[] = [
  { letter: "a", name: "(a) plain COPY, batches of 5000", run: (table, _, cpu) => plainCopy(table, cpu) },
  {
    letter: "b",
    name: "(b) Kafka → PostgresSink prepared, exactly-once",
    run: (table, topic, cpu) => kafkaJob(table, topic, "prepared", undefined, cpu),
  },
  {
    letter: "c",
    name: "(c) Kafka → PostgresSink staging, exactly-once",
    run: (table, topic, cpu) => kafkaJob(table, topic, "staging", undefined, cpu),
  },
  {
    letter: "b50",
    name: "(b50) (b) with checkpoints every 50 ms",
    run: (table, topic, cpu) => kafkaJob(table, topic, "prepared", undefined, cpu, 50),
  },
  {
    letter: "c50",
    name: "(c50) (c) with checkpoints every 50 ms",
    run: (table, topic, cpu) => kafkaJob(table, topic, "staging", undefined, cpu, 50),
  },
  {
    letter: "d",
    name: "(d) Kafka → staging, commits inline (backgroundCommits: false)",
    run: (table, topic, cpu) => kafkaJob(table, topic, "staging", false, cpu),
  },
  {
    letter: "e",
    name: "(e) Kafka → PostgresSink prepared, parallelism 2 in 2 threads",
    run: (table, topic, cpu) => threadsJob(table, topic, "prepared", 2, cpu),
  },
  {
    letter: "f",
    name: "(f) Kafka → PostgresSink staging, parallelism 2 in 2 threads",
    run: (table, topic, cpu) => threadsJob(table, topic, "staging", 2, cpu),
  },
  {
    letter: "r",
    name: "(r) read side alone: Kafka → map → DiscardingSink",
    run: (table, topic, cpu) => kafkaJob(table, topic, undefined, false, cpu),
  },
];
const wanted = new Set((args.runs as string).split(","));
const runs = allRuns.filter((r) => wanted.has(r.letter));
if (runs.length === 0) throw new Error(`--runs ${args.runs}: choose among a,b,c,d,e,f,r,b50,c50`);

const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN;
const rate = (seconds: number) => Math.round(RECORDS / seconds);
const fmt = (value: number) => value.toLocaleString("en-US");
/** CPU seconds per 1M rows, 2 decimals; "–" when not measured. */
const perMillion = (seconds: number | undefined) =>
  seconds === undefined ? "–" : ((seconds / RECORDS) * 1_000_000).toFixed(2);

/** A run's timing and what it used over its busy window. */
type Measured = Timing & { cpu: CpuUsage };

/**
 * The shortest busy time a run's CPU use allows on this machine: its Node + PostgreSQL + broker
 * CPU-s spread over all cores, or its busiest thread's CPU-s if longer (a thread uses one core at
 * a time); undefined when the PostgreSQL or the broker CPU is unknown.
 */
function floorSeconds({ cpu }: Measured): number | undefined {
  if (cpu.postgres === undefined || cpu.broker === undefined) return undefined;
  return Math.max((cpu.node + cpu.postgres + cpu.broker) / CORES, cpu.busiest?.seconds ?? 0);
}

/** The median of the defined values, undefined when there is none. */
function medianOf(values: Array<number | undefined>): number | undefined {
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length === 0 ? undefined : median(defined);
}

const topic = args.topic ?? `k2pg-${randomUUID().slice(0, 8)}`;
const timings = new Map<string, Measured[]>(runs.map((r) => [r.letter, []]));
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
      const sampler = new CpuSampler();
      let timing: Measured;
      try {
        const timed = await run(table, topic, sampler);
        timing = { ...timed, cpu: sampler.between(timed.window.from, timed.window.to) };
      } finally {
        sampler.stop();
      }
      if (toTable) {
        await verify(table);
        await withClient(url, (c) => c.query(`DROP TABLE ${table}`));
      }
      timings.get(letter)?.push(timing);
      const { cpu } = timing;
      line.push(
        `${letter} ${fmt(rate(timing.busy))}${letter === "a" ? "" : ` (wall ${fmt(rate(timing.wall))}, ${timing.checkpoints} checkpoints)`} [CPU-s Node ${cpu.node.toFixed(2)}, PostgreSQL ${cpu.postgres?.toFixed(2) ?? "–"}, broker ${cpu.broker?.toFixed(2) ?? "–"}; busiest: ${cpu.busiest?.label} ${cpu.busiest?.seconds.toFixed(2)}; machine ${cpu.machineBusyPercent.toFixed(0)} % busy]`,
      );
    }
    process.stderr.write(`round ${round + 1}: ${line.join(", ")} rows/s, verified\n`);
  }
  const baseBusy = timings.has("a") ? median((timings.get("a") ?? []).map((t) => t.busy)) : Number.NaN;
  const base = rate(baseBusy);
  console.log(
    `records: ${fmt(RECORDS)}, partitions: ${PARTITIONS}, batch: ${BATCH}, checkpoint interval: 1000 ms (filesystem; b50, c50: 50 ms), medians of ${ROUNDS} rounds; ${CORES} cores; PostgreSQL postmaster pid ${POSTMASTER_PID ?? "unknown"}, broker pid ${BROKER_PID ?? "unknown"}; CPU over the busy window`,
  );
  console.log(
    "| run | busy s | rows/s (first record → all committed) | ratio to (a) | rows/s (wall) | ratio to (a) | Node CPU-s / 1M | PostgreSQL CPU-s / 1M | broker CPU-s / 1M | busiest thread CPU-s / 1M | machine busy % | CPU bound: best ratio to (a) (floor s) |",
  );
  console.log("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const { letter, name } of runs) {
    const list = timings.get(letter) ?? [];
    const busy = rate(median(list.map((t) => t.busy)));
    const wall = rate(median(list.map((t) => t.wall)));
    // The busiest thread of the round whose busiest thread is the median one, for its name.
    const busiestSeconds = median(list.map((t) => t.cpu.busiest?.seconds ?? 0));
    const busiest = list.find((t) => (t.cpu.busiest?.seconds ?? 0) === busiestSeconds)?.cpu.busiest;
    const floor = medianOf(list.map(floorSeconds));
    const cpu = [
      perMillion(median(list.map((t) => t.cpu.node))),
      perMillion(medianOf(list.map((t) => t.cpu.postgres))),
      perMillion(medianOf(list.map((t) => t.cpu.broker))),
      busiest === undefined ? "–" : `${perMillion(busiest.seconds)} (${busiest.label})`,
      median(list.map((t) => t.cpu.machineBusyPercent)).toFixed(0),
      floor === undefined
        ? "–"
        : `${Number.isNaN(baseBusy) ? "–" : (baseBusy / floor).toFixed(2)} (${floor.toFixed(2)})`,
    ];
    console.log(
      `| ${name} | ${median(list.map((t) => t.busy)).toFixed(2)} | ${fmt(busy)} | ${(busy / base).toFixed(2)} | ${fmt(wall)} | ${(wall / base).toFixed(2)} | ${cpu.join(" | ")} |`,
    );
  }
} finally {
  await withClient(url, async (c) => {
    for (const name of created) await c.query(`DROP TABLE IF EXISTS ${name}`);
  });
  if (args["keep-topic"] || args.topic !== undefined) process.stderr.write(`input topic kept: ${topic}\n`);
  else await deleteTopic(topic).catch(() => {});
}
