// End-to-end latency of exactly-once Kafka → Kafka at a steady rate, side by side on one broker:
// the time from a record being handed to a producer to a read_committed reader seeing it in the
// output. With exactly-once a record is visible only once its checkpoint (or commit) completed,
// so this is what the checkpoint interval costs.
// Candidates (each its own process; --candidates picks, the rounds rotate their order):
//   onceflow-1s-fs, onceflow-50ms-fs, onceflow-100ms-fs — onceflow KafkaSource → KafkaSink
//     exactly-once, checkpoints every 1 s / 50 ms / 100 ms on the filesystem (candidates/onceflow-latency-job.mjs);
//   onceflow-50ms-pg — the same with PostgreSQL checkpoint storage (--postgres, default
//     postgresql://postgres@127.0.0.1:5432/test);
//   streams-50, streams-100 — Kafka Streams exactly_once_v2, commit.interval.ms 50 / 100;
//   flink-50, flink-100 — Flink KafkaSource → KafkaSink EXACTLY_ONCE, checkpoints every 50 / 100 ms
//     (the Java peers: `bash bench/kafka/peers/build.sh` once).
//   java-txn-50 — the ceiling: a plain Java transactional consume → produce loop (kafka-clients,
//     read_committed consumer, transactional producer, sendOffsetsToTransaction, a commit every 50 ms;
//     peers/kafka-java TransactionalLoop.java): what any exactly-once pipeline pays on this broker;
//   onceflow-keyed-50ms, onceflow-keyed-p2-50ms — KafkaSource → keyBy(key) → a keyed process passing
//     the value on → KafkaSink, exactly-once, 50 ms checkpoints (filesystem), parallelism 1 / 2 in one
//     thread (candidates/onceflow-keyed-latency-job.mjs);
//   onceflow-keyed-processes-50ms — the same at parallelism 2, one process per subtask
//     (candidates/onceflow-processes.mjs): keyBy's exchange goes through a Kafka repartition topic,
//     one more exactly-once hop (written, committed with a checkpoint, read read_committed);
//   pg-prepared-50ms, pg-staging-50ms, pg-prepared-1s, pg-staging-1s — Kafka → PostgresSink exactly-once
//     (candidates/postgres-latency-job.mjs) into a fresh table on --postgres-sink (a PostgreSQL with
//     max_prepared_transactions > 0); the reader (candidates/postgres-latency-reader.mjs) polls the
//     table on its own connection and measures when each row became visible.
// Per candidate: fresh input and output topics; a reader (candidates/latency-reader.mjs: onceflow's
// KafkaSource, read_committed, which filters aborted transactions as the Java consumer does —
// kafkajs's consumer does not) joins first; the pipeline starts; one probe record must come through
// (the pipeline is up); then candidates/latency-writer.mjs writes 100-byte records at --rate for
// --seconds, each stamped with the time it was sent. Records sent in the first --warmup seconds
// are left out of the percentiles. The onceflow candidates also report their checkpoints' phases
// (onceflow_checkpoint_phase_duration_seconds, p50/p99), the Java ceiling its commits' durations.
// The machine's CPU busy % over the window, the CPU of the pipeline, the writer, the reader and the
// broker (per cent of one core) and the load average are printed with each figure: on a shared
// machine they say how far to trust it, and which process the rate was waiting for.
//
//   npm run build -w @onceflow/core -w @onceflow/connector-kafka -w @onceflow/connector-postgres
//   ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092 npx tsx bench/kafka/latency.mts --rate 100000 --seconds 20
//   … --candidates onceflow-1s-fs,onceflow-50ms-fs,onceflow-50ms-pg,onceflow-keyed-50ms,streams-50,streams-100,flink-50,flink-100,java-txn-50
//   … --rate 50000 --postgres-sink postgresql://…/postgres --candidates pg-prepared-50ms,pg-staging-50ms,pg-prepared-1s,pg-staging-1s
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";
import {
  brokerPid,
  CORES,
  cpuSecondsIfAlive,
  machineJiffies,
  processTreeCpuSeconds,
} from "../process-cpu.js";
import { createTopic } from "./input-topic.js";

const { values: args } = parseArgs({
  options: {
    rate: { type: "string", default: "100000" },
    seconds: { type: "string", default: "20" },
    warmup: { type: "string", default: "3" },
    partitions: { type: "string", default: "4" },
    rounds: { type: "string", default: "1" },
    candidates: { type: "string", default: "onceflow-1s-fs,onceflow-50ms-fs,onceflow-50ms-pg" },
    postgres: { type: "string", default: "postgresql://postgres@127.0.0.1:5432/test" },
    /** The PostgreSQL the pg-* candidates write to (prepared mode needs max_prepared_transactions > 0). */
    "postgres-sink": { type: "string", default: process.env.ONCEFLOW_POSTGRES_URL },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const WARMUP_MS = Number(args.warmup) * 1000;
const PARTITIONS = Number(args.partitions);
const ROUNDS = Number(args.rounds);
const here = fileURLToPath(new URL(".", import.meta.url));
const brokers = (process.env.ONCEFLOW_KAFKA_BROKERS ?? "127.0.0.1:39092").split(",");
const kafka = new Kafka({ brokers, clientId: "onceflow-latency", logLevel: logLevel.NOTHING });
const run = randomUUID().slice(0, 8);
const BROKER_PID = brokerPid(brokers);

interface Launch {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

function javaPeer(
  project: string,
  mainClass: string,
  peerArgs: string[],
  env: Record<string, string>,
): Launch {
  const folder = join(here, "peers", project);
  const classpathFile = join(folder, "classpath.txt");
  if (!existsSync(classpathFile)) {
    throw new Error(`${classpathFile} is missing: run \`bash bench/kafka/peers/build.sh\` first`);
  }
  const classpath = `${join(folder, "target", "classes")}:${readFileSync(classpathFile, "utf8").trim()}`;
  return { command: "java", args: ["-cp", classpath, `dev.onceflow.bench.${mainClass}`, ...peerArgs], env };
}

function onceflow(interval: number, storage: "fs" | "pg") {
  return (input: string, output: string, dir: string): Launch => {
    const prefix = `lat-${randomUUID().slice(0, 8)}`;
    return {
      command: process.execPath,
      args: [
        join(here, "candidates/onceflow-latency-job.mjs"),
        brokers.join(","),
        input,
        output,
        prefix,
        String(interval),
        storage === "fs" ? dir : (args.postgres as string),
      ],
    };
  };
}

function streams(interval: number) {
  return (input: string, output: string, dir: string): Launch =>
    javaPeer(
      "kafka-java",
      "KafkaStreamsExactlyOnce",
      [
        brokers.join(","),
        input,
        output,
        String(Number.MAX_SAFE_INTEGER),
        `lat-streams-${randomUUID().slice(0, 8)}`,
        dir,
      ],
      { BENCH_COMMIT_INTERVAL_MS: String(interval) },
    );
}

function flink(interval: number) {
  return (input: string, output: string): Launch =>
    javaPeer(
      "flink",
      "FlinkExactlyOnce",
      [brokers.join(","), input, output, `lat-flink-${randomUUID().slice(0, 8)}`],
      {
        BENCH_CHECKPOINT_INTERVAL_MS: String(interval),
        BENCH_UNBOUNDED: "1",
      },
    );
}

function transactionalLoop(interval: number) {
  return (input: string, output: string): Launch => {
    const id = `lat-txn-${randomUUID().slice(0, 8)}`;
    return javaPeer("kafka-java", "TransactionalLoop", [brokers.join(","), input, output, id, id], {
      BENCH_COMMIT_INTERVAL_MS: String(interval),
    });
  };
}

function keyed(interval: number, parallelism: number) {
  return (input: string, output: string, dir: string): Launch => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-keyed-latency-job.mjs"),
      brokers.join(","),
      input,
      output,
      `lat-keyed-${randomUUID().slice(0, 8)}`,
      String(interval),
      dir,
      String(parallelism),
    ],
  });
}

/** The keyed candidate with one process per subtask, the exchange through a repartition topic. */
function keyedProcesses(interval: number, parallelism: number) {
  return (input: string, output: string, dir: string): Launch => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-processes.mjs"),
      String(parallelism),
      brokers.join(","),
      input,
      output,
      `lat-keyed-processes-${randomUUID().slice(0, 8)}`,
      String(interval),
      dir,
    ],
  });
}

/** `output` is the table here. */
function postgresSink(mode: "prepared" | "staging", interval: number) {
  return (input: string, output: string, dir: string): Launch => ({
    command: process.execPath,
    args: [
      join(here, "candidates/postgres-latency-job.mjs"),
      brokers.join(","),
      input,
      postgresSinkUrl(),
      output,
      mode,
      String(interval),
      dir,
      `lat-pg-${randomUUID().slice(0, 8)}`,
    ],
  });
}

function postgresSinkUrl(): string {
  const url = args["postgres-sink"];
  if (url === undefined) throw new Error("the pg-* candidates need --postgres-sink or ONCEFLOW_POSTGRES_URL");
  return url;
}

interface Candidate {
  launch: (input: string, output: string, dir: string) => Launch;
  /** Where the output goes: a topic (the default) or a PostgreSQL table. */
  output?: "kafka" | "postgres";
  /** Prints {"event":"phases"} when its stdin closes. */
  phases?: boolean;
}

const candidates: Record<string, Candidate> = {
  "onceflow-1s-fs": { launch: onceflow(1000, "fs"), phases: true },
  "onceflow-100ms-fs": { launch: onceflow(100, "fs"), phases: true },
  "onceflow-50ms-fs": { launch: onceflow(50, "fs"), phases: true },
  "onceflow-50ms-pg": { launch: onceflow(50, "pg"), phases: true },
  "onceflow-keyed-50ms": { launch: keyed(50, 1), phases: true },
  "onceflow-keyed-p2-50ms": { launch: keyed(50, 2), phases: true },
  "onceflow-keyed-processes-50ms": { launch: keyedProcesses(50, 2), phases: true },
  "pg-prepared-50ms": { launch: postgresSink("prepared", 50), output: "postgres", phases: true },
  "pg-staging-50ms": { launch: postgresSink("staging", 50), output: "postgres", phases: true },
  "pg-prepared-1s": { launch: postgresSink("prepared", 1000), output: "postgres", phases: true },
  "pg-staging-1s": { launch: postgresSink("staging", 1000), output: "postgres", phases: true },
  "streams-50": { launch: streams(50) },
  "streams-100": { launch: streams(100) },
  "flink-50": { launch: flink(50) },
  "flink-100": { launch: flink(100) },
  "java-txn-50": { launch: transactionalLoop(50), phases: true },
};

/** A fresh table for a pg-* candidate: seq numbers the rows in the order they were written. */
async function createTable(name: string): Promise<string> {
  const client = new pg.Client({ connectionString: postgresSinkUrl() });
  await client.connect();
  try {
    await client.query(
      `CREATE TABLE ${name} (seq bigserial PRIMARY KEY, sent_at bigint NOT NULL, payload text NOT NULL)`,
    );
  } finally {
    await client.end();
  }
  return name;
}

/**
 * The postmaster pid of the pg-* candidates' server (its `postmaster.pid`), for the server's CPU:
 * undefined when it cannot be read (another machine, another user's files).
 */
async function postmasterPid(): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: postgresSinkUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ data_directory: string }>("SHOW data_directory");
    const pid = Number(
      readFileSync(join(rows[0]?.data_directory ?? "", "postmaster.pid"), "utf8").split("\n")[0],
    );
    return Number.isSafeInteger(pid) ? pid : undefined;
  } catch {
    return undefined;
  } finally {
    await client.end();
  }
}

/** The server's CPU seconds so far (the postmaster and its children), or undefined. */
function postgresCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    return processTreeCpuSeconds(pid);
  } catch {
    return undefined;
  }
}

async function dropTable(name: string): Promise<void> {
  const client = new pg.Client({ connectionString: postgresSinkUrl() });
  await client.connect();
  await client.query(`DROP TABLE IF EXISTS ${name}`).finally(() => client.end());
}

/** Spawns a child whose stdout carries `{"event":…}` lines; `next(name)` waits for one. */
function child(launch: Launch) {
  const process_: ChildProcess = spawn(launch.command, launch.args, {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, ...launch.env },
  });
  const events: Record<string, unknown>[] = [];
  const waiters: Array<() => void> = [];
  createInterface({ input: process_.stdout as NodeJS.ReadableStream }).on("line", (line) => {
    if (!line.startsWith('{"event":')) return;
    events.push(JSON.parse(line));
    for (const waiter of waiters.splice(0)) waiter();
  });
  const exited = new Promise<number | null>((resolve) => process_.on("exit", resolve));
  return {
    process: process_,
    async next(name: string, timeoutMs: number): Promise<Record<string, unknown>> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find((event) => event.event === name);
        if (found) return found;
        if (process_.exitCode !== null)
          throw new Error(`${launch.args[0] ?? launch.command} exited before "${name}"`);
        if (Date.now() > deadline)
          throw new Error(`no "${name}" from ${launch.args.join(" ")} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    async end(): Promise<void> {
      process_.stdin?.end();
      const timer = setTimeout(() => process_.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

interface Measurement {
  candidate: string;
  written: number;
  writtenPerSecond: number;
  lateTicks: number;
  seen: number;
  measured: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  machineBusyPercent: number;
  /** CPU over the writing, per cent of one core: the pipeline, the writer, the reader, the broker. */
  cpu: { pipeline?: number; writer: number; reader?: number; broker?: number; postgres?: number };
  load: string;
  phases: Record<string, unknown> | undefined;
}

async function measure(name: string, round: number): Promise<Measurement> {
  const candidate = candidates[name];
  if (candidate === undefined)
    throw new Error(`unknown candidate ${name}; known: ${Object.keys(candidates).join(", ")}`);
  const input = await createTopic(kafka, `lat-${run}-${name}-${round}-in`, PARTITIONS);
  const toPostgres = candidate.output === "postgres";
  const output = toPostgres
    ? await createTable(`lat_${run}_${name.replace(/-/g, "_")}_${round}`)
    : await createTopic(kafka, `lat-${run}-${name}-${round}-out`, PARTITIONS);
  const dir = await mkdtemp(join(tmpdir(), `lat-${name}-`));
  const postmaster = toPostgres ? await postmasterPid() : undefined;
  const reader = child(
    toPostgres
      ? {
          command: process.execPath,
          args: [join(here, "candidates/postgres-latency-reader.mjs"), postgresSinkUrl(), output],
        }
      : {
          command: process.execPath,
          args: [join(here, "candidates/latency-reader.mjs"), brokers.join(","), output],
        },
  );
  const pipeline = child(candidate.launch(input, output, dir));
  try {
    await reader.next("ready", 60_000);
    // The pipeline is up once a probe record comes through (its time is before the warm-up ends).
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    await producer.send({
      topic: input,
      messages: [{ value: Buffer.from(`${Date.now()}`.padEnd(100, "x")) }],
    });
    await producer.disconnect();
    await reader.next("first", 180_000);
    const writer = child({
      command: process.execPath,
      args: [
        join(here, "candidates/latency-writer.mjs"),
        brokers.join(","),
        input,
        String(RATE),
        String(SECONDS),
        String(PARTITIONS),
      ],
    });
    const startedAt = Date.now();
    reader.process.stdin?.write(`cutoff ${startedAt + WARMUP_MS}\n`);
    const busyBefore = machineJiffies().busy;
    const pids = [pipeline.process.pid, reader.process.pid, BROKER_PID];
    const cpuBefore = [...pids.map(cpuSecondsIfAlive), postgresCpuSeconds(postmaster)];
    const written = (await writer.next("done", SECONDS * 1000 + 120_000)) as {
      records: number;
      seconds: number;
      lateTicks: number;
      cpuSeconds: number;
    };
    const busyAfter = machineJiffies().busy;
    const cpuAfter = [...pids.map(cpuSecondsIfAlive), postgresCpuSeconds(postmaster)];
    const window = (Date.now() - startedAt) / 1000;
    const share = (index: number) => {
      const before = cpuBefore[index];
      const after = cpuAfter[index];
      return before === undefined || after === undefined
        ? undefined
        : Math.round(((after - before) / window) * 100);
    };
    await writer.end();
    // Let the last checkpoint (or commit) complete and the reader see it.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const load = loadavg()
      .map((value) => value.toFixed(1))
      .join(" ");
    let phases: Record<string, unknown> | undefined;
    if (candidate.phases) {
      pipeline.process.stdin?.end();
      phases = await pipeline.next("phases", 30_000).catch(() => undefined);
    }
    reader.process.stdin?.end();
    const read = (await reader.next("latencies", 60_000)) as {
      seen: number;
      measured: number;
      p50: number;
      p90: number;
      p99: number;
      max: number;
    };
    return {
      candidate: name,
      written: written.records,
      writtenPerSecond: Math.round(written.records / written.seconds),
      lateTicks: written.lateTicks,
      seen: read.seen - 1, // the probe is not counted
      measured: read.measured,
      p50: read.p50,
      p90: read.p90,
      p99: read.p99,
      max: read.max,
      machineBusyPercent: Math.round(((busyAfter - busyBefore) / 100 / (CORES * window)) * 100),
      cpu: {
        pipeline: share(0),
        writer: Math.round((written.cpuSeconds / written.seconds) * 100),
        reader: share(1),
        broker: share(2),
        postgres: share(3),
      },
      load,
      phases,
    };
  } finally {
    await Promise.all([pipeline.end(), reader.end()]);
    await rm(dir, { recursive: true, force: true });
    if (toPostgres) await dropTable(output);
  }
}

const names = (args.candidates as string).split(",");
console.log(
  `${RATE.toLocaleString("en")} records/s of 100 bytes for ${SECONDS} s over ${PARTITIONS} partitions (first ${args.warmup} s left out); ${ROUNDS} round(s); candidates ${names.join(", ")}; ${CORES} cores`,
);
const results = new Map<string, Measurement[]>(names.map((name) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length] as string);
  for (const name of order) {
    const m = await measure(name, round);
    results.get(name)?.push(m);
    console.log(
      `round ${round + 1} ${name.padEnd(18)} written ${m.written} (${m.writtenPerSecond}/s, ${m.lateTicks} late ticks), seen ${m.seen}; latency ms p50 ${m.p50} p90 ${m.p90} p99 ${m.p99} max ${m.max} over ${m.measured}; machine CPU busy ${m.machineBusyPercent} % (% of a core: pipeline ${m.cpu.pipeline ?? "–"}, writer ${m.cpu.writer}, reader ${m.cpu.reader ?? "–"}, broker ${m.cpu.broker ?? "–"}${m.cpu.postgres === undefined ? "" : `, PostgreSQL ${m.cpu.postgres}`}), load average ${m.load}` +
        (m.phases ? `\n  checkpoints: ${JSON.stringify(m.phases)}` : ""),
    );
  }
}
const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
console.log(
  "\n| candidate | written records/s | seen / written | p50 ms | p90 ms | p99 ms | max ms | machine CPU busy % | % of a core: pipeline / writer / reader / broker | load average (1/5/15 min) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
);
for (const [name, list] of results) {
  const m = (key: keyof Measurement) => median(list.map((entry) => entry[key] as number));
  console.log(
    `| ${name} | ${m("writtenPerSecond").toLocaleString("en")} | ${list.map((e) => `${e.seen}/${e.written}`).join(", ")} | ${m("p50")} | ${m("p90")} | ${m("p99")} | ${m("max")} | ${m("machineBusyPercent")} | ${(["pipeline", "writer", "reader", "broker"] as const).map((part) => median(list.map((e) => e.cpu[part] ?? Number.NaN))).join(" / ")} | ${list.map((e) => e.load).join("; ")} |`,
  );
}
process.exit(0);
