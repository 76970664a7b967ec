// Kafka → Kafka side by side with the peers the issue names, on one broker, in one command:
//   onceflow exactly-once / at-least-once, onceflow exactly-once at parallelism 2 in worker threads
//   (onceflow-eos-threads, not in the default set), a hand-written kafkajs transactional loop,
//   Kafka Streams (exactly_once_v2), Flink KafkaSource → KafkaSink (EXACTLY_ONCE, MiniCluster),
//   and a plain Java consume → produce loop (the broker's ceiling).
// Each candidate is its own process: it reads the same pre-written input (N records of 100 bytes
// over 4 partitions) from the start, changes nothing, writes it to its own output topic and says
// when it is through. Then the output is read back read_committed (every id once, none missing),
// the process's CPU time is taken from /proc/<pid>/stat, and it is let go. Rounds rotate the order;
// medians are reported as ratios to onceflow exactly-once.
// Restart to work (issue 11, goal 4): seconds from the spawn to the job's first completed
// checkpoint (onceflow candidates print it, see report.mjs) and to the first output record a
// read_committed consumer, in its group before the spawn, receives. Memory (goal 5): VmRSS from
// /proc/<pid>/status when 1 M records were processed and at the end of the input (the last progress
// line, every 100,000 records, while the job still runs), the median of VmRSS sampled every 250 ms,
// and VmHWM (the kernel's peak RSS) — with
// --records 10000000 the first two show whether RSS stays flat.
//
//   bash bench/kafka/peers/build.sh            # once: the Java peers from Maven Central
//   npm run build -w @onceflow/core -w @onceflow/connector-kafka
//   ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092 npx tsx bench/kafka/compare.mts --records 1000000 --rounds 3
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

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    partitions: { type: "string", default: "4" },
    rounds: { type: "string", default: "3" },
    candidates: {
      type: "string",
      default: "onceflow-eos,onceflow-alo,kafkajs-loop,kafka-streams,flink,java-loop",
    },
  },
});
const RECORDS = Number(args.records);
const PARTITIONS = Number(args.partitions);
const ROUNDS = Number(args.rounds);
const here = fileURLToPath(new URL(".", import.meta.url));
const brokers = (process.env.ONCEFLOW_KAFKA_BROKERS ?? "127.0.0.1:39092").split(",");
const kafka = new Kafka({ brokers, clientId: "onceflow-compare", logLevel: logLevel.NOTHING });
const run = randomUUID().slice(0, 8);
const CLOCK_TICKS_PER_SECOND = 100; // getconf CLK_TCK on Linux x86_64

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

const candidates: Record<string, (input: string, output: string, dir: string) => Launch> = {
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
  // The same job on kafkajs's own produce path (the exactly-once sink before its lean producer).
  "onceflow-eos-kafkajs": (input, output, dir) => ({
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
    env: { ONCEFLOW_BENCH_KAFKAJS_PRODUCE: "1" },
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

async function createTopic(name: string): Promise<string> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [{ topic: name, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  await admin.disconnect();
  return name;
}

/** N records of 100 bytes whose value starts with its id, so the output check finds duplicates. */
async function seed(topic: string): Promise<void> {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const chunk = 10_000;
  for (let i = 0; i < RECORDS; i += chunk) {
    const n = Math.min(chunk, RECORDS - i);
    const messages = Array.from({ length: n }, (_, j) => ({
      value: `${i + j} `.padEnd(100, "x"),
      partition: (i + j) % PARTITIONS,
    }));
    await producer.sendBatch({ topicMessages: [{ topic, messages }] });
  }
  await producer.disconnect();
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

function cpuSeconds(pid: number): number {
  // Fields after the command's closing parenthesis: utime and stime are fields 14 and 15.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/** VmRSS and VmHWM (peak RSS) of a process in MiB, from /proc/<pid>/status. */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

/**
 * Joins a read_committed consumer of `topic` to its group (before the candidate starts) and
 * resolves `first` with the time the first record reached it. `stop` disconnects it.
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
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length > 0) seen(Date.now());
    },
  });
  await joined;
  let stopped: Promise<void> | undefined;
  return { first, stop: () => (stopped ??= consumer.disconnect()) };
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
}

async function measure(name: string, input: string, round: number): Promise<Measurement> {
  const launch = candidates[name];
  if (launch === undefined) throw new Error(`unknown candidate ${name}`);
  const output = await createTopic(`cmp-${run}-${name}-${round}`);
  const dir = await mkdtemp(join(tmpdir(), `cmp-${name}-`));
  const { command, args: commandArgs, env } = launch(input, output, dir);
  const firstOutput = await watchFirstOutput(output);
  const started = Date.now();
  const child: ChildProcess = spawn(command, commandArgs, {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  const pid = child.pid as number;
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  let firstCheckpointAt: number | undefined;
  let rssAtMillion: number | undefined;
  let rssAtEnd: number | undefined;
  const progress = new Map<number, number>();
  const samples: number[] = [];
  const sampler = setInterval(() => {
    if (child.exitCode === null) samples.push(memoryMiB(pid).rss);
  }, 250);
  try {
    const report = await new Promise<{ records: number; firstAt: number; lastAt: number }>(
      (resolve, reject) => {
        createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
          if (!line.startsWith('{"event":')) return;
          const event = JSON.parse(line);
          if (event.event === "done") resolve(event);
          else if (event.event === "checkpoint") firstCheckpointAt ??= event.at;
          else if (event.event === "progress") {
            progress.set(event.reporter, event.records);
            const total = [...progress.values()].reduce((a, b) => a + b, 0);
            rssAtEnd = memoryMiB(pid).rss;
            if (rssAtMillion === undefined && total >= 1_000_000) rssAtMillion = rssAtEnd;
          }
        });
        void exited.then((code) => reject(new Error(`${name} exited with ${code} before it was done`)));
      },
    );
    clearInterval(sampler);
    const memory = memoryMiB(pid);
    const firstOutputAt = await Promise.race([
      firstOutput.first,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${name}: no output seen read_committed`)), 60_000).unref(),
      ),
    ]);
    await firstOutput.stop();
    await verify(output);
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
    };
  } finally {
    clearInterval(sampler);
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

const names = (args.candidates as string).split(",");
const input = await createTopic(`cmp-${run}-input`);
await seed(input);
console.log(
  `${RECORDS.toLocaleString("en")} records of 100 bytes over ${PARTITIONS} partitions; ${ROUNDS} rounds; candidates ${names.join(", ")}`,
);
const results = new Map<string, Measurement[]>(names.map((n) => [n, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length] as string);
  for (const name of order) {
    const m = await measure(name, input, round);
    results.get(name)?.push(m);
    console.log(
      `round ${round + 1} ${name.padEnd(14)} ${m.recordsPerSecond.toLocaleString("en").padStart(9)} rec/s  ${m.cpuSecondsPerMillion.toFixed(1).padStart(5)} CPU-s/1M  (${m.wallSeconds.toFixed(1)} s wall, output verified)  first checkpoint ${seconds(m.firstCheckpointSeconds)} s, first output ${seconds(m.firstOutputSeconds)} s  RSS ${mib(m.rssAtMillionMiB)} MiB at 1M, ${mib(m.rssEndMiB)} at the end of input, median ${mib(m.rssMedianMiB)}, peak ${mib(m.rssPeakMiB)}`,
    );
  }
}
const reference = median(
  (results.get("onceflow-eos") ?? results.get(names[0] as string) ?? []).map((m) => m.recordsPerSecond),
);
console.log(
  "\n| system | records/s (median) | ratio to onceflow EOS | CPU-s per 1M records (median) | s to first checkpoint | s to first output | RSS MiB at 1M / end of input / median / peak |\n|---|--:|--:|--:|--:|--:|--:|",
);
for (const [name, list] of results) {
  const rate = median(list.map((m) => m.recordsPerSecond));
  const rss = [
    mib(medianOf(list.map((m) => m.rssAtMillionMiB))),
    mib(medianOf(list.map((m) => m.rssEndMiB))),
    mib(medianOf(list.map((m) => m.rssMedianMiB))),
    mib(median(list.map((m) => m.rssPeakMiB))),
  ];
  console.log(
    `| ${name} | ${rate.toLocaleString("en")} | ${(rate / reference).toFixed(2)} | ${median(list.map((m) => m.cpuSecondsPerMillion)).toFixed(1)} | ${seconds(medianOf(list.map((m) => m.firstCheckpointSeconds)))} | ${seconds(median(list.map((m) => m.firstOutputSeconds)))} | ${rss.join(" / ")} |`,
  );
}
