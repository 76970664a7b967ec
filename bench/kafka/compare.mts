// Kafka → Kafka side by side with its peers, on one broker, in one command:
//   onceflow exactly-once / at-least-once, onceflow exactly-once at parallelism 2 in worker threads
//   (onceflow-eos-threads, not in the default set; -50ms variants of both checkpoint every 50 ms
//   instead of every second), a hand-written kafkajs transactional loop,
//   Kafka Streams (exactly_once_v2), Flink KafkaSource → KafkaSink (EXACTLY_ONCE, MiniCluster),
//   and a plain Java consume → produce loop (the broker's ceiling).
// Each candidate is its own process: it reads the same pre-written input (N records of 100 bytes
// over 4 partitions) from the start, changes nothing (but with --work, below), writes it to its
// own output topic and says when it is through. Then the output is read back read_committed (every
// id once, none missing), the process's CPU time is taken from /proc/<pid>/stat, and it is let go.
// Rounds rotate the order; medians are reported as ratios to onceflow exactly-once.
// Start to first checkpoint: seconds from the spawn to the job's first completed
// checkpoint (onceflow candidates print it, see report.mjs) and to the first output record a
// read_committed consumer, in its group before the spawn, receives. Memory: VmRSS from
// /proc/<pid>/status when 1 M records were processed and at the end of the input (the last progress
// line, every 100,000 records, while the job still runs), the median of VmRSS sampled every 250 ms,
// and VmHWM (the kernel's peak RSS) — with
// --records 10000000 the first two show whether RSS stays flat. Single samples swing with garbage
// collection, so RSS is also sampled every 50 ms with the records processed so far, and the median
// over the second tenth of the input (after the start) is set against the median over its last
// tenth: the steady-state drift.
// Machine load: /proc/stat (all CPUs), /proc/<pid>/stat of the candidate and of
// the broker (the process listening on the first broker's port, found with `ss -ltnp`, or
// --broker-pid; the readers are in bench/process-cpu.ts) are sampled every 100 ms and interpolated
// at the candidate's first and last processed record: how busy the machine was over that window
// (busy jiffies / (cores × wall)), the candidate's and the broker's share of it, and the broker's
// CPU-s per 1M records. A machine near 100 % busy means the rate is the machine's, not the
// candidate's.
// Per-record CPU work (parallelism measured where the broker is not the limit): --work <n> gives the onceflow
// candidates' map n passes of FNV-1a, an arithmetic loop, over each value; the result replaces the
// value's last 4 bytes (candidates/work.mjs, BENCH_WORK); in the keyed pipeline the map before the
// keying does it (the value then crosses keyBy's exchange, the count ignores it). Onceflow
// candidates only.
// Settings, to set a default against another side by side (onceflow candidates only):
// --prefetch-bytes <n> is the KafkaSource's maxPrefetchBytes (BENCH_PREFETCH_BYTES), and
// --thread-young-generation <MiB> each subtask thread's maxYoungGenerationSizeMb in
// onceflow-eos-threads (BENCH_THREAD_YOUNG_MB); --linger-ms <ms> the exactly-once KafkaSink's
// lingerMs (BENCH_LINGER_MS, 0 allowed); unset, the defaults of the code.
// The keyed pipeline (candidates named *-keyed*): Kafka → keyBy(user) → 1 s tumbling event-time
// window count → Kafka, exactly-once — onceflow with keyBy (the exchange) and with
// reinterpretAsKeyedStream (none), at parallelism 1, 2 in one thread and 2 in worker threads (and
// onceflow-keyed-threads-serializer: keyBy with kafkaRecordSerializer, the records crossing the
// threads as bytes instead of structured clones);
// Flink (KafkaSource → keyBy → TumblingEventTimeWindows → aggregate → KafkaSink EXACTLY_ONCE) and
// Kafka Streams (groupByKey → windowedBy → count → to, exactly_once_v2). Its input: record i is
// user `u<i mod users>` (the record key; users a multiple of the partitions, so each user's records
// are in one partition, as Kafka Streams' groupByKey and reinterpretAsKeyedStream require) with the
// Kafka timestamp base + ⌊i / window-records⌋ s + a share of the second, ascending in each
// partition. Its output is checked against the counts computed from the input: every (user,
// window) once with its count (Kafka Streams emits updates: its last count of each), read_committed.
// A run holds candidates of one pipeline only.
// --baseline <checkout> adds the candidates `<onceflow candidate>@baseline`: the same candidate
// script from another checkout, built (its node_modules resolve @onceflow/* to its own packages),
// so that a change is measured against the build before it in the same run.
// --cpu-prof <dir> runs the Node candidates (onceflow's, the kafkajs loop) under `node --cpu-prof --cpu-prof-dir=<dir>` (one
// .cpuprofile per thread, worker threads included; NODE_OPTIONS may not carry --cpu-prof). The
// profiler costs a few per cent, so leave it out of runs whose numbers are recorded.
//
//   bash bench/kafka/peers/build.sh            # once: the Java peers from Maven Central
//   npm run build -w @onceflow/core -w @onceflow/connector-kafka
//   ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092 npx tsx bench/kafka/compare.mts --records 1000000 --rounds 3
//   … --candidates onceflow-eos,onceflow-eos-threads --records 300000 --rounds 3 --work 60
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Kafka, logLevel } from "kafkajs";
import {
  brokerPid,
  CLOCK_TICKS_PER_SECOND,
  CORES,
  cpuSeconds,
  cpuSecondsIfAlive,
  machineJiffies,
} from "../process-cpu.js";
import { createTopic, writeInput } from "./input-topic.js";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    partitions: { type: "string", default: "4" },
    rounds: { type: "string", default: "3" },
    candidates: {
      type: "string",
      default: "onceflow-eos,onceflow-alo,kafkajs-loop,kafka-streams,flink,java-loop",
    },
    work: { type: "string", default: "0" },
    "prefetch-bytes": { type: "string" },
    "thread-young-generation": { type: "string" },
    "linger-ms": { type: "string" },
    "broker-pid": { type: "string" },
    "cpu-prof": { type: "string" },
    users: { type: "string", default: "1000" },
    "window-records": { type: "string", default: "20000" },
    baseline: { type: "string" },
  },
});
const RECORDS = Number(args.records);
const PARTITIONS = Number(args.partitions);
const ROUNDS = Number(args.rounds);
const WORK = Number(args.work);
const USERS = Number(args.users);
const WINDOW_RECORDS = Number(args["window-records"]);
if (!(Number.isInteger(USERS) && USERS > 0 && USERS % PARTITIONS === 0)) {
  throw new Error(`--users must be a positive multiple of --partitions (${PARTITIONS}), not ${args.users}`);
}
if (!(Number.isInteger(WINDOW_RECORDS) && WINDOW_RECORDS > 0)) {
  throw new Error(`--window-records must be an integer > 0, not ${args["window-records"]}`);
}
if (!Number.isInteger(WORK) || WORK < 0) throw new Error(`--work must be an integer ≥ 0, not ${args.work}`);
for (const flag of ["prefetch-bytes", "thread-young-generation"] as const) {
  const value = args[flag];
  if (value !== undefined && !(Number.isInteger(Number(value)) && Number(value) > 0)) {
    throw new Error(`--${flag} must be an integer > 0, not ${value}`);
  }
}
// The candidates read these; unset, the code's defaults apply.
if (
  args["linger-ms"] !== undefined &&
  !(Number.isInteger(Number(args["linger-ms"])) && Number(args["linger-ms"]) >= 0)
) {
  throw new Error(`--linger-ms must be an integer ≥ 0, not ${args["linger-ms"]}`);
}
const CANDIDATE_SETTINGS: Record<string, string> = {
  ...(args["prefetch-bytes"] === undefined ? {} : { BENCH_PREFETCH_BYTES: args["prefetch-bytes"] }),
  ...(args["thread-young-generation"] === undefined
    ? {}
    : { BENCH_THREAD_YOUNG_MB: args["thread-young-generation"] }),
  ...(args["linger-ms"] === undefined ? {} : { BENCH_LINGER_MS: args["linger-ms"] }),
};
const here = fileURLToPath(new URL(".", import.meta.url));
const brokers = (process.env.ONCEFLOW_KAFKA_BROKERS ?? "127.0.0.1:39092").split(",");
const kafka = new Kafka({ brokers, clientId: "onceflow-compare", logLevel: logLevel.NOTHING });
const run = randomUUID().slice(0, 8);

interface Launch {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

function javaPeer(project: string, mainClass: string, peerArgs: string[]): Launch {
  const folder = join(here, "peers", project);
  const classpathFile = join(folder, "classpath.txt");
  if (!existsSync(classpathFile)) {
    throw new Error(`${classpathFile} is missing: run \`bash bench/kafka/peers/build.sh\` first`);
  }
  const classpath = `${join(folder, "target", "classes")}:${readFileSync(classpathFile, "utf8").trim()}`;
  return { command: "java", args: ["-cp", classpath, `dev.onceflow.bench.${mainClass}`, ...peerArgs] };
}

/** A onceflow candidate with checkpoints every 50 ms instead of every second. */
function every50ms(launch: Launch): Launch {
  return { ...launch, env: { ...launch.env, BENCH_CHECKPOINT_INTERVAL_MS: "50" } };
}

/** onceflow's keyed candidate, in this thread (onceflow-keyed-job.mjs) or in worker threads. */
function onceflowKeyed(
  keying: "key-group" | "split",
  parallelism: number,
  threads = false,
  serializer = false,
) {
  return (input: string, output: string, dir: string): Launch => ({
    ...(serializer ? { env: { BENCH_SERIALIZER: "1" } } : {}),
    command: process.execPath,
    args: [
      join(here, threads ? "candidates/onceflow-threads.mjs" : "candidates/onceflow-keyed-job.mjs"),
      brokers.join(","),
      input,
      output,
      keying,
      dir,
      `cmp-${randomUUID().slice(0, 8)}`,
      String(parallelism),
      ...(threads ? ["keyed"] : []),
    ],
  });
}

/** The candidates of the keyed pipeline (see the top of this file); the others pass records through. */
const keyedCandidates: Record<string, (input: string, output: string, dir: string) => Launch> = {
  "onceflow-keyed": onceflowKeyed("key-group", 1),
  "onceflow-keyed-reinterpret": onceflowKeyed("split", 1),
  "onceflow-keyed-p2": onceflowKeyed("key-group", 2),
  "onceflow-keyed-reinterpret-p2": onceflowKeyed("split", 2),
  "onceflow-keyed-threads": onceflowKeyed("key-group", 2, true),
  "onceflow-keyed-threads-serializer": onceflowKeyed("key-group", 2, true, true),
  "onceflow-keyed-reinterpret-threads": onceflowKeyed("split", 2, true),
  "flink-keyed": (input, output) =>
    javaPeer("flink", "FlinkKeyedWindowCount", [
      brokers.join(","),
      input,
      output,
      `cmp-flink-${randomUUID().slice(0, 8)}`,
    ]),
  "kafka-streams-keyed": (input, output, dir) =>
    javaPeer("kafka-java", "KafkaStreamsKeyedWindowCount", [
      brokers.join(","),
      input,
      output,
      String(RECORDS),
      `cmp-streams-${randomUUID().slice(0, 8)}`,
      dir,
    ]),
};

const candidates: Record<string, (input: string, output: string, dir: string) => Launch> = {
  ...keyedCandidates,
  "onceflow-eos": (input, output, dir) => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-job.mjs"),
      brokers.join(","),
      input,
      output,
      "exactly-once",
      dir,
      `cmp-${randomUUID().slice(0, 8)}`,
    ],
  }),
  // The onceflow-eos job at parallelism 2, both subtasks in the one thread (compare -threads).
  "onceflow-eos-p2": (input, output, dir) => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-job.mjs"),
      brokers.join(","),
      input,
      output,
      "exactly-once",
      dir,
      `cmp-${randomUUID().slice(0, 8)}`,
      "2",
    ],
  }),
  "onceflow-alo": (input, output, dir) => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-job.mjs"),
      brokers.join(","),
      input,
      output,
      "at-least-once",
      dir,
      `cmp-${randomUUID().slice(0, 8)}`,
    ],
  }),
  // The same pipeline at parallelism 2, each subtask in a worker thread of one process.
  "onceflow-eos-threads": (input, output, dir) => ({
    command: process.execPath,
    args: [
      join(here, "candidates/onceflow-threads.mjs"),
      brokers.join(","),
      input,
      output,
      "exactly-once",
      dir,
      `cmp-${randomUUID().slice(0, 8)}`,
      "2",
    ],
  }),
  // The same two at 50 ms checkpoints (interactive latency), to set against the 1 s default.
  "onceflow-eos-50ms": (input, output, dir) => every50ms(candidates["onceflow-eos"]!(input, output, dir)),
  "onceflow-eos-threads-50ms": (input, output, dir) =>
    every50ms(candidates["onceflow-eos-threads"]!(input, output, dir)),
  "kafkajs-loop": (input, output) => ({
    command: process.execPath,
    args: [
      join(here, "candidates/kafkajs-loop.mjs"),
      brokers.join(","),
      input,
      output,
      String(RECORDS),
      `cmp-loop-${randomUUID().slice(0, 8)}`,
    ],
  }),
  "kafka-streams": (input, output, dir) =>
    javaPeer("kafka-java", "KafkaStreamsExactlyOnce", [
      brokers.join(","),
      input,
      output,
      String(RECORDS),
      `cmp-streams-${randomUUID().slice(0, 8)}`,
      dir,
    ]),
  flink: (input, output) =>
    javaPeer("flink", "FlinkExactlyOnce", [
      brokers.join(","),
      input,
      output,
      `cmp-flink-${randomUUID().slice(0, 8)}`,
    ]),
  "java-loop": (input, output) =>
    javaPeer("kafka-java", "PlainLoop", [brokers.join(","), input, output, String(RECORDS)]),
};

const BASELINE = args.baseline;
/** `name@baseline`: the candidate `name`'s script from the --baseline checkout. */
function launcherOf(name: string): ((input: string, output: string, dir: string) => Launch) | undefined {
  const [base, suffix] = name.split("@") as [string, string | undefined];
  const launch = candidates[base];
  if (suffix === undefined || launch === undefined) return launch;
  if (suffix !== "baseline" || !base.startsWith("onceflow-")) return undefined;
  if (BASELINE === undefined) throw new Error(`${name} needs --baseline <checkout>`);
  const baselineHere = join(BASELINE, "bench", "kafka");
  return (input, output, dir) => {
    const launched = launch(input, output, dir);
    const script = launched.args[0] as string;
    const moved = join(baselineHere, script.slice(here.length));
    if (!existsSync(moved)) throw new Error(`${moved} is missing: --baseline must be a checkout of onceflow`);
    return { ...launched, args: [moved, ...launched.args.slice(1)] };
  };
}
const isKeyed = (name: string) => (name.split("@")[0] as string) in keyedCandidates;

/** The keyed input's user of record `id`, and the start of its 1 s event-time window. */
const userOf = (id: number) => `u${id % USERS}`;
const windowOf = (id: number, base: number) => base + Math.floor(id / WINDOW_RECORDS) * 1000;

/**
 * N records of 100 bytes whose value starts with its id, so the output check finds duplicates; for
 * the keyed pipeline keyed by user, with event times from `base` (see the top of this file).
 */
function seed(topic: string, keyed: boolean, base: number): Promise<void> {
  return writeInput(kafka, topic, {
    count: RECORDS,
    partitions: PARTITIONS,
    message: keyed
      ? (id) => ({
          key: userOf(id),
          value: `${id} `.padEnd(100, "x"),
          timestamp: String(windowOf(id, base) + Math.floor(((id % WINDOW_RECORDS) * 1000) / WINDOW_RECORDS)),
        })
      : (id) => ({ value: `${id} `.padEnd(100, "x") }),
  });
}

/** The count of each `<user> <window start>` the keyed pipeline should write for the input. */
function expectedCounts(base: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let id = 0; id < RECORDS; id++) {
    const window = `${userOf(id)} ${windowOf(id, base)}`;
    counts.set(window, (counts.get(window) ?? 0) + 1);
  }
  return counts;
}

/**
 * Reads the keyed pipeline's `topic` read_committed until every (user, window) has its expected
 * count. `updates` (Kafka Streams): a window's count may come several times, growing; the last one
 * counts. Otherwise each comes once: a second one, a wrong count or a stranger fails.
 */
async function verifyCounts(topic: string, expected: Map<string, number>, updates: boolean): Promise<void> {
  const latest = new Map<string, number>();
  let right = 0;
  const consumer = kafka.consumer({
    groupId: `compare-verify-${randomUUID()}`,
    readUncommitted: false,
    maxBytes: 16 * 1024 * 1024,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let fail: (error: Error) => void = () => {};
  let succeed: () => void = () => {};
  const complete = new Promise<void>((resolve, reject) => {
    succeed = resolve;
    fail = reject;
  });
  const timer = setTimeout(
    () =>
      fail(
        new Error(`${topic}: only ${right} of ${expected.size} (user, window) counts right after 5 minutes`),
      ),
    300_000,
  );
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const message of batch.messages) {
        const text = message.value?.toString("latin1") ?? "";
        const space = text.lastIndexOf(" ");
        const window = text.slice(0, space);
        const count = Number(text.slice(space + 1));
        const want = expected.get(window);
        if (want === undefined) return fail(new Error(`${topic}: unexpected count ${text}`));
        const before = latest.get(window);
        if (before !== undefined && !updates) return fail(new Error(`${topic}: ${window} twice`));
        if (count > want || (!updates && count !== want))
          return fail(new Error(`${topic}: ${window} counted ${count}, the input has ${want}`));
        if (before === want) right--;
        if (count === want) right++;
        latest.set(window, count);
      }
      if (right === expected.size) succeed();
    },
  });
  try {
    await complete;
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
}

/** Reads `topic` read_committed until every id arrived; fails on a duplicate or a stranger. */
async function verify(topic: string): Promise<void> {
  const seen = new Uint8Array(RECORDS);
  let distinct = 0;
  const consumer = kafka.consumer({
    groupId: `compare-verify-${randomUUID()}`,
    readUncommitted: false,
    maxBytes: 16 * 1024 * 1024,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let fail: (error: Error) => void = () => {};
  let succeed: () => void = () => {};
  const complete = new Promise<void>((resolve, reject) => {
    succeed = resolve;
    fail = reject;
  });
  const timer = setTimeout(
    () => fail(new Error(`${topic}: only ${distinct} of ${RECORDS} ids after 5 minutes`)),
    300_000,
  );
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const message of batch.messages) {
        const text = message.value?.toString("latin1") ?? "";
        const id = Number(text.slice(0, text.indexOf(" ")));
        if (!Number.isInteger(id) || id < 0 || id >= RECORDS)
          return fail(new Error(`${topic}: unexpected value ${text.slice(0, 20)}`));
        if (seen[id] === 1) return fail(new Error(`${topic}: id ${id} twice`));
        seen[id] = 1;
        distinct++;
      }
      if (distinct === RECORDS) succeed();
    },
  });
  try {
    await complete;
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
}

const BROKER_PID = brokerPid(brokers, args["broker-pid"]);

interface CpuSample {
  at: number;
  /** Busy seconds of all CPUs together. */
  machine: number;
  candidate: number | undefined;
  broker: number | undefined;
  /** This process (compare.mts): it should take next to nothing while a candidate runs. */
  driver: number;
}

function cpuSample(pid: number): CpuSample {
  return {
    at: Date.now(),
    machine: machineJiffies().busy / CLOCK_TICKS_PER_SECOND,
    candidate: cpuSecondsIfAlive(pid),
    broker: cpuSecondsIfAlive(BROKER_PID),
    driver: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
  };
}

/** A field of the samples at time `at`, interpolated linearly between the samples around it. */
function interpolate(samples: CpuSample[], at: number, field: Exclude<keyof CpuSample, "at">) {
  const usable = samples.filter((s) => s[field] !== undefined);
  const after = usable.findIndex((s) => s.at >= at);
  if (usable.length === 0) return undefined;
  if (after <= 0) return (after === 0 ? usable[0] : usable.at(-1))?.[field];
  const a = usable[after - 1] as CpuSample;
  const b = usable[after] as CpuSample;
  return (a[field] as number) + (((b[field] as number) - (a[field] as number)) * (at - a.at)) / (b.at - a.at);
}

/** What the machine, the candidate and the broker used between the first and the last record. */
function machineLoad(samples: CpuSample[], firstAt: number, lastAt: number) {
  const capacity = (CORES * Math.max(1, lastAt - firstAt)) / 1000;
  const used = (field: Exclude<keyof CpuSample, "at">) => {
    const from = interpolate(samples, firstAt, field);
    const to = interpolate(samples, lastAt, field);
    return from === undefined || to === undefined ? undefined : to - from;
  };
  const broker = used("broker");
  const percent = (value: number | undefined) => (value === undefined ? undefined : (100 * value) / capacity);
  return {
    machineBusyPercent: percent(used("machine")) as number,
    candidatePercent: percent(used("candidate")),
    brokerPercent: percent(broker),
    driverPercent: percent(used("driver")) as number,
    brokerCpuSecondsPerMillion: broker === undefined ? undefined : (broker / RECORDS) * 1_000_000,
  };
}

/** VmRSS and VmHWM (peak RSS) of a process in MiB, from /proc/<pid>/status. */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

/**
 * Joins a read_committed consumer of `topic` to its group (before the candidate starts) and
 * resolves `first` with the time the first record reached it; it then stops fetching and leaves, so
 * that it does not compete with the candidate for CPU. `stop` disconnects it (if it has not left).
 */
async function watchFirstOutput(
  topic: string,
): Promise<{ first: Promise<number>; stop: () => Promise<void> }> {
  const consumer = kafka.consumer({
    groupId: `compare-first-${randomUUID()}`,
    readUncommitted: false,
    maxWaitTimeInMs: 50,
  });
  let seen: (at: number) => void = () => {};
  const first = new Promise<number>((resolve) => {
    seen = resolve;
  });
  const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= consumer.disconnect());
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      seen(Date.now());
      // Fetching (and decoding) the rest of the output would take CPU from the candidate: stop
      // fetching now, and leave once this batch is through (disconnect waits for it).
      consumer.pause([{ topic }]);
      setImmediate(() => void stop());
    },
  });
  await joined;
  return { first, stop };
}

interface Measurement {
  candidate: string;
  recordsPerSecond: number;
  cpuSecondsPerMillion: number;
  wallSeconds: number;
  /** Seconds from the spawn to the first completed checkpoint (onceflow candidates only). */
  firstCheckpointSeconds: number | undefined;
  /** Seconds from the spawn to the first output record a read_committed consumer received. */
  firstOutputSeconds: number;
  /** VmRSS (MiB) when 1 M records were processed (undefined below 1 M). */
  rssAtMillionMiB: number | undefined;
  /** VmRSS (MiB) at the last progress line: the input nearly all processed, the job still running. */
  rssEndMiB: number | undefined;
  /** The median of VmRSS (MiB) sampled every 250 ms from the spawn to the end of input. */
  rssMedianMiB: number | undefined;
  /** VmHWM (MiB) at the end: the peak RSS of the whole run. */
  rssPeakMiB: number;
  /** The median of VmRSS (MiB) sampled while each tenth of the input was processed (10 entries). */
  rssByTenthMiB: (number | undefined)[];
  /** Busy CPU time of the whole machine between the first and the last record, % of cores × wall. */
  machineBusyPercent: number;
  /** The candidate process's CPU time over the same window, % of cores × wall (50 % = 1 of 2 cores). */
  candidatePercent: number | undefined;
  /** The broker's CPU time over the same window, % of cores × wall (undefined: its pid is unknown). */
  brokerPercent: number | undefined;
  /** compare.mts's own CPU time over the same window, % of cores × wall. */
  driverPercent: number;
  /** The broker's CPU seconds over the same window, per 1M records. */
  brokerCpuSecondsPerMillion: number | undefined;
}

async function measure(
  name: string,
  input: string,
  round: number,
  expected: Map<string, number> | undefined,
): Promise<Measurement> {
  const launch = launcherOf(name);
  if (launch === undefined) throw new Error(`unknown candidate ${name}`);
  const output = await createTopic(kafka, `cmp-${run}-${name.replace("@", ".")}-${round}`, PARTITIONS);
  const dir = await mkdtemp(join(tmpdir(), `cmp-${name.replace("@", ".")}-`));
  const { command, args: commandArgs, env } = launch(input, output, dir);
  const firstOutput = await watchFirstOutput(output);
  const started = Date.now();
  const profile = args["cpu-prof"];
  const nodeFlags =
    profile !== undefined && command === process.execPath ? ["--cpu-prof", `--cpu-prof-dir=${profile}`] : [];
  const child: ChildProcess = spawn(command, [...nodeFlags, ...commandArgs], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, ...env, BENCH_WORK: String(WORK), ...CANDIDATE_SETTINGS },
  });
  const pid = child.pid as number;
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  let firstCheckpointAt: number | undefined;
  let rssAtMillion: number | undefined;
  let rssAtEnd: number | undefined;
  const progress = new Map<number, number>();
  let processed = 0;
  const samples: number[] = [];
  const byTenth: number[][] = Array.from({ length: 10 }, () => []);
  let sampledAt = 0;
  const sampler = setInterval(() => {
    if (child.exitCode !== null) return;
    const rss = memoryMiB(pid).rss;
    byTenth[Math.min(9, Math.floor((processed * 10) / RECORDS))]?.push(rss);
    // The whole-run median keeps its 250 ms spacing.
    if (Date.now() - sampledAt >= 250) {
      samples.push(rss);
      sampledAt = Date.now();
    }
  }, 50);
  const cpuSamples: CpuSample[] = [cpuSample(pid)];
  const cpuSampler = setInterval(() => {
    if (child.exitCode === null) cpuSamples.push(cpuSample(pid));
  }, 100);
  try {
    const report = await new Promise<{ records: number; firstAt: number; lastAt: number }>(
      (resolve, reject) => {
        createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
          if (!line.startsWith('{"event":')) return;
          const event = JSON.parse(line);
          if (event.event === "done") {
            clearInterval(cpuSampler);
            cpuSamples.push(cpuSample(pid));
            resolve(event);
          } else if (event.event === "checkpoint") firstCheckpointAt ??= event.at;
          else if (event.event === "progress") {
            progress.set(event.reporter, event.records);
            const total = [...progress.values()].reduce((a, b) => a + b, 0);
            processed = total;
            rssAtEnd = memoryMiB(pid).rss;
            if (rssAtMillion === undefined && total >= 1_000_000) rssAtMillion = rssAtEnd;
          }
        });
        void exited.then((code) => reject(new Error(`${name} exited with ${code} before it was done`)));
      },
    );
    clearInterval(sampler);
    const memory = memoryMiB(pid);
    const load = machineLoad(cpuSamples, report.firstAt, report.lastAt);
    const firstOutputAt = await Promise.race([
      firstOutput.first,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${name}: no output seen read_committed`)), 60_000).unref(),
      ),
    ]);
    await firstOutput.stop();
    if (expected === undefined) await verify(output);
    else await verifyCounts(output, expected, name.startsWith("kafka-streams"));
    const cpu = cpuSeconds(pid);
    child.stdin?.end();
    await exited;
    const busy = Math.max(1, report.lastAt - report.firstAt) / 1000;
    return {
      candidate: name,
      recordsPerSecond: Math.round(RECORDS / busy),
      cpuSecondsPerMillion: (cpu / RECORDS) * 1_000_000,
      wallSeconds: (Date.now() - started) / 1000,
      firstCheckpointSeconds:
        firstCheckpointAt === undefined ? undefined : (firstCheckpointAt - started) / 1000,
      firstOutputSeconds: (firstOutputAt - started) / 1000,
      rssAtMillionMiB: rssAtMillion,
      rssEndMiB: rssAtEnd,
      rssMedianMiB: medianOf(samples),
      rssPeakMiB: memory.peak,
      rssByTenthMiB: byTenth.map((tenth) => medianOf(tenth)),
      ...load,
    };
  } finally {
    clearInterval(sampler);
    clearInterval(cpuSampler);
    await firstOutput.stop();
    if (child.exitCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
/** The median of the defined values, undefined when there is none. */
const medianOf = (values: Array<number | undefined>) => {
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length === 0 ? undefined : median(defined);
};
const seconds = (value: number | undefined) => (value === undefined ? "–" : value.toFixed(2));
const mib = (value: number | undefined) => (value === undefined ? "–" : value.toFixed(0));
const percent = (value: number | undefined) => (value === undefined ? "–" : value.toFixed(0));
/** The busy % neither the candidate, the broker nor this driver used (other processes, interrupts). */
const rest = (m: Measurement) =>
  m.candidatePercent === undefined || m.brokerPercent === undefined
    ? undefined
    : Math.max(0, m.machineBusyPercent - m.candidatePercent - m.brokerPercent - m.driverPercent);
const cpuPerMillion = (value: number | undefined) => (value === undefined ? "–" : value.toFixed(1));
/** RSS over the second tenth of the input → over its last tenth, and the change between them. */
const drift = (second: number | undefined, last: number | undefined) =>
  second === undefined || last === undefined
    ? "–"
    : `${second.toFixed(0)} → ${last.toFixed(0)} (${last >= second ? "+" : ""}${((last / second - 1) * 100).toFixed(0)} %)`;

function describeCandidateSettings(): string {
  const prefetch = args["prefetch-bytes"];
  const young = args["thread-young-generation"];
  const linger = args["linger-ms"];
  return `prefetch ${prefetch === undefined ? "default" : `${prefetch} bytes`}, threads' young generation ${young === undefined ? "default" : `${young} MiB`}, sink linger ${linger === undefined ? "default" : `${linger} ms`}`;
}

const names = (args.candidates as string).split(",");
for (const name of names) if (launcherOf(name) === undefined) throw new Error(`unknown candidate ${name}`);
const keyed = isKeyed(names[0] as string);
if (names.some((name) => isKeyed(name) !== keyed)) {
  throw new Error("a run holds candidates of one pipeline: the keyed ones (*-keyed*) or the others");
}
if (
  (WORK > 0 || Object.keys(CANDIDATE_SETTINGS).length > 0) &&
  names.some((name) => !name.startsWith("onceflow-"))
) {
  throw new Error(
    "--work, --prefetch-bytes, --thread-young-generation and --linger-ms are implemented by the onceflow candidates only: leave the others out",
  );
}
const input = await createTopic(kafka, `cmp-${run}-input`, PARTITIONS);
// Event time starts at the current second: a broker deletes records older than its retention.
const base = Math.floor(Date.now() / 1000) * 1000;
await seed(input, keyed, base);
const expected = keyed ? expectedCounts(base) : undefined;
console.log(
  `${RECORDS.toLocaleString("en")} records of 100 bytes over ${PARTITIONS} partitions${keyed ? `, keyed by ${USERS} users, ${WINDOW_RECORDS.toLocaleString("en")} records per 1 s window (${expected?.size.toLocaleString("en")} counts to write)` : ""}; ${ROUNDS} rounds; candidates ${names.join(", ")}; work ${WORK} FNV-1a passes per record; ${describeCandidateSettings()}; ${CORES} cores; broker pid ${BROKER_PID ?? "unknown"}`,
);
const results = new Map<string, Measurement[]>(names.map((n) => [n, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length] as string);
  for (const name of order) {
    const m = await measure(name, input, round, expected);
    results.get(name)?.push(m);
    console.log(
      `round ${round + 1} ${name.padEnd(14)} ${m.recordsPerSecond.toLocaleString("en").padStart(9)} rec/s  ${m.cpuSecondsPerMillion.toFixed(2).padStart(6)} CPU-s/1M  (${m.wallSeconds.toFixed(1)} s wall, output verified)  first checkpoint ${seconds(m.firstCheckpointSeconds)} s, first output ${seconds(m.firstOutputSeconds)} s  RSS ${mib(m.rssAtMillionMiB)} MiB at 1M, ${mib(m.rssEndMiB)} at the end of input, median ${mib(m.rssMedianMiB)}, peak ${mib(m.rssPeakMiB)}, second tenth → last tenth ${drift(m.rssByTenthMiB[1], m.rssByTenthMiB[9])} (by tenth of the input: ${m.rssByTenthMiB.map((value) => mib(value)).join(" ")})  machine CPU busy ${percent(m.machineBusyPercent)} % (candidate ${percent(m.candidatePercent)} %, broker ${percent(m.brokerPercent)} %, this driver ${percent(m.driverPercent)} %, the rest ${percent(rest(m))} %), broker ${cpuPerMillion(m.brokerCpuSecondsPerMillion)} CPU-s/1M`,
    );
  }
}
const referenceName = results.has("onceflow-eos") ? "onceflow-eos" : (names[0] as string);
const reference = median((results.get(referenceName) ?? []).map((m) => m.recordsPerSecond));
console.log(
  `\n| system | records/s (median) | ratio to ${referenceName} | CPU-s per 1M records (median) | s to first checkpoint | s to first output | RSS MiB at 1M / end of input / median / peak | RSS MiB, input's second tenth → last tenth | machine CPU busy % | candidate CPU % | broker CPU % | broker CPU-s per 1M records |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|`,
);
for (const [name, list] of results) {
  const rate = median(list.map((m) => m.recordsPerSecond));
  const rss = [
    mib(medianOf(list.map((m) => m.rssAtMillionMiB))),
    mib(medianOf(list.map((m) => m.rssEndMiB))),
    mib(medianOf(list.map((m) => m.rssMedianMiB))),
    mib(median(list.map((m) => m.rssPeakMiB))),
  ];
  const steady = drift(
    medianOf(list.map((m) => m.rssByTenthMiB[1])),
    medianOf(list.map((m) => m.rssByTenthMiB[9])),
  );
  const load = [
    percent(median(list.map((m) => m.machineBusyPercent))),
    percent(medianOf(list.map((m) => m.candidatePercent))),
    percent(medianOf(list.map((m) => m.brokerPercent))),
    cpuPerMillion(medianOf(list.map((m) => m.brokerCpuSecondsPerMillion))),
  ];
  console.log(
    `| ${name} | ${rate.toLocaleString("en")} | ${(rate / reference).toFixed(2)} | ${median(list.map((m) => m.cpuSecondsPerMillion)).toFixed(2)} | ${seconds(medianOf(list.map((m) => m.firstCheckpointSeconds)))} | ${seconds(median(list.map((m) => m.firstOutputSeconds)))} | ${rss.join(" / ")} | ${steady} | ${load.join(" | ")} |`,
  );
}
