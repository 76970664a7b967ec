// Benchmark: Kafka → Kafka on one broker, in one run and one process tree:
//   (a) a plain kafkajs consume → produce loop with no guarantees (eachBatch + sendBatch),
//   (b) onceflow KafkaSource → KafkaSink, at-least-once, checkpoints every second,
//   (c) onceflow KafkaSource → KafkaSink, exactly-once, checkpoints every second.
// Throughput: the same pre-written input (N records of 100 bytes over 4 partitions) read from the
// start by each. Latency: records written at a steady rate while each pipeline runs; the time from
// writing a record to a read_committed reader seeing it in the output.
//
//   npm run build -w @onceflow/core && npm run build -w @onceflow/connector-kafka
//   ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092 npx tsx bench/kafka/bench.ts --records 1000000 --rounds 3
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Deserializers, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { createMemoryMetrics, filesystem, Job, MetricNames } from "@onceflow/core";
import { Kafka, logLevel } from "kafkajs";
import { createTopic, writeInput } from "./input-topic.js";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    partitions: { type: "string", default: "4" },
    "latency-records": { type: "string", default: "20000" },
    "latency-rate": { type: "string", default: "5000" },
    rounds: { type: "string", default: "3" },
  },
});
const RECORDS = Number(args.records);
const PARTITIONS = Number(args.partitions);
const LATENCY_RECORDS = Number(args["latency-records"]);
const LATENCY_RATE = Number(args["latency-rate"]);
const ROUNDS = Number(args.rounds);
const brokers = (process.env.ONCEFLOW_KAFKA_BROKERS ?? "127.0.0.1:39092").split(",");
const kafka = new Kafka({ brokers, clientId: "onceflow-bench", logLevel: logLevel.NOTHING });
const run = randomUUID().slice(0, 8);

type Mode = "baseline" | "at-least-once" | "exactly-once";

/** A 100-byte value that starts with the time it was written. */
function payload(now: number): Buffer {
  return Buffer.from(`${now}`.padEnd(100, "x"));
}

function seed(topic: string, count: number): Promise<void> {
  return writeInput(kafka, topic, { count, partitions: PARTITIONS, message: () => ({ value: payload(0) }) });
}

interface Pipeline {
  /** Resolves when `expected` records went through (bounded runs) or when stopped. */
  done: Promise<void>;
  stop(): Promise<void>;
  processed(): number;
  firstAt(): number;
  lastAt(): number;
  checkpointDurations(): number[];
}

function baseline(input: string, output: string, expected: number | undefined): Pipeline {
  let count = 0;
  let first = 0;
  let last = 0;
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  const consumer = kafka.consumer({ groupId: `bench-baseline-${randomUUID()}`, maxBytes: 16 * 1024 * 1024 });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const started = (async () => {
    await Promise.all([consumer.connect(), producer.connect()]);
    await consumer.subscribe({ topic: input, fromBeginning: true });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        if (first === 0) first = Date.now();
        await producer.sendBatch({
          topicMessages: [
            { topic: output, messages: batch.messages.map((m) => ({ key: m.key, value: m.value })) },
          ],
        });
        count += batch.messages.length;
        last = Date.now();
        if (expected !== undefined && count >= expected) resolveDone();
      },
    });
  })();
  return {
    done,
    stop: async () => {
      await started;
      await consumer.disconnect();
      await producer.disconnect();
    },
    processed: () => count,
    firstAt: () => first,
    lastAt: () => last,
    checkpointDurations: () => [],
  };
}

function onceflow(
  mode: Exclude<Mode, "baseline">,
  input: string,
  output: string,
  bounded: boolean,
  dir: string,
): Pipeline {
  let count = 0;
  let first = 0;
  let last = 0;
  const metrics = createMemoryMetrics();
  const job = new Job({
    jobId: `bench-${mode}-${randomUUID().slice(0, 8)}`,
    metrics,
    checkpointing: { interval: 1000, storage: filesystem(dir) },
    restartStrategy: { type: "none" },
  });
  job
    .fromSource(
      new KafkaSource({
        brokers,
        topics: [input],
        startingOffsets: "earliest",
        ...(bounded ? { stoppingOffsets: "latest" as const } : {}),
        value: Deserializers.buffer(),
        key: Deserializers.buffer(),
      }),
      { uid: "in" },
    )
    .map((record) => {
      const now = Date.now();
      if (first === 0) first = now;
      last = now;
      count++;
      return record.value ?? Buffer.alloc(0);
    })
    .sinkTo(
      new KafkaSink<Buffer>({
        brokers,
        topic: output,
        deliveryGuarantee: mode,
        transactionalIdPrefix: `bench-${run}-${mode}-${bounded ? "t" : "l"}`,
      }),
      { uid: "out" },
    );
  const done = job.execute().then(() => undefined);
  return {
    done,
    stop: async () => {
      job.stop();
      await done;
    },
    processed: () => count,
    firstAt: () => first,
    lastAt: () => last,
    checkpointDurations: () =>
      metrics.observations(MetricNames.checkpointDurationSeconds).map((seconds) => seconds * 1000),
  };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function throughput(mode: Mode, input: string, dir: string, round: number) {
  const output = await createTopic(kafka, `bench-${run}-${mode}-out-${round}`, PARTITIONS);
  const started = Date.now();
  const pipeline =
    mode === "baseline"
      ? baseline(input, output, RECORDS)
      : onceflow(mode, input, output, true, join(dir, `${mode}-t`));
  await pipeline.done;
  const wall = Date.now() - started;
  await pipeline.stop();
  const busy = pipeline.lastAt() - pipeline.firstAt();
  return {
    mode,
    records: pipeline.processed(),
    wallMs: wall,
    recordsPerSecond: Math.round((pipeline.processed() / busy) * 1000),
    checkpoints: pipeline.checkpointDurations(),
  };
}

/** Writes records at a steady rate while the pipeline runs; a read_committed reader times their arrival. */
async function latency(mode: Mode, dir: string) {
  const input = await createTopic(kafka, `bench-${run}-${mode}-lat-in`, PARTITIONS);
  const output = await createTopic(kafka, `bench-${run}-${mode}-lat-out`, PARTITIONS);
  const pipeline =
    mode === "baseline"
      ? baseline(input, output, undefined)
      : onceflow(mode, input, output, false, join(dir, `${mode}-l`));
  const latencies: number[] = [];
  const reader = kafka.consumer({ groupId: `bench-reader-${randomUUID()}`, readUncommitted: false });
  await reader.connect();
  await reader.subscribe({ topic: output, fromBeginning: true });
  await reader.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      for (const m of batch.messages) latencies.push(now - Number(m.value?.subarray(0, 13).toString()));
    },
  });
  await new Promise((resolve) => setTimeout(resolve, 5000)); // both sides running
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const perTick = Math.max(1, Math.round(LATENCY_RATE / 100));
  for (let sent = 0; sent < LATENCY_RECORDS; sent += perTick) {
    const tick = Date.now();
    await producer.send({
      topic: input,
      messages: Array.from({ length: perTick }, (_, j) => ({
        value: payload(Date.now()),
        partition: (sent + j) % PARTITIONS,
      })),
    });
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10 - (Date.now() - tick))));
  }
  const deadline = Date.now() + 30_000;
  while (latencies.length < LATENCY_RECORDS && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  await producer.disconnect();
  await reader.disconnect();
  await pipeline.stop();
  return { mode, seen: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

const dir = await mkdtemp(join(tmpdir(), "onceflow-bench-kafka-"));
try {
  const input = await createTopic(kafka, `bench-${run}-in`, PARTITIONS);
  const seedStart = Date.now();
  await seed(input, RECORDS);
  console.log(
    `seeded ${RECORDS} records of 100 bytes over ${PARTITIONS} partitions in ${Date.now() - seedStart} ms`,
  );
  // Rounds rotate the order, so that no mode always runs first (cold) or last (fuller broker).
  const modes = ["baseline", "at-least-once", "exactly-once"] as const;
  const rates = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  const checkpoints = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < modes.length; i++) {
      const mode = modes[(i + round) % modes.length] as Mode;
      const result = await throughput(mode, input, dir, round);
      console.log(
        `round ${round + 1} ${mode}: ${result.records} records, ${result.recordsPerSecond} records/s (wall ${result.wallMs} ms)`,
      );
      rates.get(mode)?.push(result.recordsPerSecond);
      checkpoints.get(mode)?.push(...result.checkpoints);
    }
  }
  const median = (mode: Mode) => percentile(rates.get(mode) ?? [], 50);
  for (const mode of modes) {
    const durations = checkpoints.get(mode) ?? [];
    console.log(
      `${mode}: median ${median(mode)} records/s over ${ROUNDS} round(s)` +
        (durations.length > 0
          ? `, checkpoint duration p50 ${percentile(durations, 50)} ms p99 ${percentile(durations, 99)} ms (${durations.length} checkpoints)`
          : ""),
    );
  }
  console.log(
    `ratio b/a ${(median("at-least-once") / median("baseline")).toFixed(2)}, c/a ${(median("exactly-once") / median("baseline")).toFixed(2)}`,
  );
  for (const mode of ["baseline", "at-least-once", "exactly-once"] as const) {
    const result = await latency(mode, dir);
    console.log(
      `${mode}: end-to-end latency p50 ${result.p50} ms p99 ${result.p99} ms (${result.seen} records at ${LATENCY_RATE}/s)`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
