// Run: npx tsx examples/kafka-to-kafka/main.ts [--brokers host:port]   (or ONCEFLOW_KAFKA_BROKERS)
// The pipeline of Flink's two-phase-commit write-up: read a topic, count per key in 10-second
// tumbling event-time windows (the Kafka record timestamps), write the counts to another topic in
// Kafka transactions tied to checkpoints, so a read_committed consumer sees each count once.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KafkaSink, KafkaSource, Serializers } from "@onceflow/connector-kafka";
import {
  countAggregate,
  createConsoleLogger,
  filesystem,
  Job,
  type JobResult,
  TumblingEventTimeWindows,
  WatermarkStrategy,
} from "@onceflow/core";
import { createKafkaTopic } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";

/** One output record: how many events a key had in one window. */
export interface WindowCount {
  readonly key: string;
  readonly windowStart: number;
  readonly windowEnd: number;
  readonly count: number;
}

export interface KafkaToKafkaJobOptions {
  readonly brokers: string[];
  readonly inputTopic: string;
  readonly outputTopic: string;
  /** Stable across restarts: checkpoints are found by it. */
  readonly jobId: string;
  readonly groupId: string;
  /** Unique per sink in the cluster and stable across restarts. */
  readonly transactionalIdPrefix: string;
  /** Where checkpoints go (a folder); the job restores the latest one found there. */
  readonly checkpointDirectory: string;
  readonly checkpointInterval?: number;
  readonly parallelism?: number;
  /** Stop at the end offsets seen at start (a bounded run); else run until stopped. */
  readonly bounded?: boolean;
}

/** Builds the job: KafkaSource → keyBy → 10 s tumbling event-time windows → count → KafkaSink. */
export function buildKafkaToKafkaJob(options: KafkaToKafkaJobOptions): Job {
  const job = new Job({
    jobId: options.jobId,
    parallelism: options.parallelism ?? 1,
    checkpointing: {
      interval: options.checkpointInterval ?? 5000,
      storage: filesystem(options.checkpointDirectory),
    },
    restartStrategy: { type: "none" },
    logger: createConsoleLogger({ level: "warn" }),
  });
  job
    .fromSource(
      new KafkaSource({
        brokers: options.brokers,
        topics: [options.inputTopic],
        groupId: options.groupId,
        startingOffsets: "earliest",
        ...(options.bounded === false ? {} : { stoppingOffsets: "latest" as const }),
        commitOffsetsOnCheckpoint: true,
      }),
      // No timestamp assigner: the Kafka record timestamps are the event times.
      { uid: "events", watermarks: WatermarkStrategy.forBoundedOutOfOrderness(1000) },
    )
    // One state per key for the whole job, whatever partition a record came from.
    .keyBy((record) => record.key ?? "")
    .window(TumblingEventTimeWindows.of(10_000))
    .aggregate(
      countAggregate(),
      (key, window, count): WindowCount => ({
        key,
        windowStart: window.start,
        windowEnd: window.end,
        count,
      }),
      { uid: "counts" },
    )
    .sinkTo(
      () =>
        new KafkaSink<WindowCount>({
          brokers: options.brokers,
          topic: options.outputTopic,
          key: { serialize: (count) => count.key },
          value: Serializers.json(),
          // Flink stamps a window's result with the window's last millisecond.
          timestamp: (count) => count.windowEnd - 1,
          deliveryGuarantee: "exactly-once",
          transactionalIdPrefix: options.transactionalIdPrefix,
        }),
      { uid: "counts-out" },
    );
  return job;
}

/** A 10 s-aligned base time, so the windows are easy to read. */
export const BASE_TIME = 1_767_225_600_000;

/** One input event: its key and its explicit Kafka timestamp. */
export interface InputEvent {
  readonly key: string;
  readonly timestamp: number;
}

const USERS = ["alice", "bob", "carol", "dave"];

/** The example's bounded input: `count` events over 4 keys (dave rarer), 0.35 s apart in event time. */
export function exampleInput(count = 200): InputEvent[] {
  return Array.from({ length: count }, (_, index) => ({
    key: USERS[(index % 7) % 4] as string,
    timestamp: BASE_TIME + index * 350,
  }));
}

function client(brokers: string[]): Kafka {
  return new Kafka({ brokers, clientId: "kafka-to-kafka-example", logLevel: logLevel.NOTHING });
}

/** Creates the topics and waits for their leaders (the testkit's helper, which also waits them out). */
export async function createTopics(brokers: string[], topics: string[], partitions = 3): Promise<void> {
  for (const topic of topics) await createKafkaTopic(brokers, topic, { partitions });
}

/** Writes the events keyed by `key` (one key, one partition) with their explicit timestamps. */
export async function produceInput(brokers: string[], topic: string, events: InputEvent[]): Promise<void> {
  const producer = client(brokers).producer({ allowAutoTopicCreation: false, idempotent: true });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: events.map((event, index) => ({
        key: event.key,
        value: JSON.stringify({ index }),
        timestamp: String(event.timestamp),
      })),
    });
  } finally {
    await producer.disconnect();
  }
}

/**
 * Reads everything committed in `topic` with a read_committed consumer, until `expected` arrived.
 * kafkajs' consumer is right for this clean run; after crashes (aborted transactions of several
 * producers interleaved) read with a Java-rule reader instead (see the Kafka connector's README).
 */
export async function readCommittedCounts(
  brokers: string[],
  topic: string,
  expected: number,
  timeoutMs = 30_000,
): Promise<WindowCount[]> {
  const consumer = client(brokers).consumer({
    groupId: `kafka-to-kafka-reader-${randomBytes(4).toString("hex")}`,
    readUncommitted: false,
    maxWaitTimeInMs: 100,
  });
  const counts: WindowCount[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let done: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      done = resolve;
    });
    await consumer.run({
      eachMessage: async ({ message }) => {
        counts.push(JSON.parse(message.value?.toString() ?? "null") as WindowCount);
        if (counts.length >= expected) done();
      },
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  } finally {
    await consumer.disconnect();
  }
  return counts;
}

/** The counts the input should give: (key, window start) → events. */
export function expectedCounts(events: InputEvent[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const event of events) {
    const windowStart = event.timestamp - (event.timestamp % 10_000);
    const id = `${event.key}@${windowStart}`;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

export interface ExampleRun {
  readonly inputTopic: string;
  readonly outputTopic: string;
  readonly events: InputEvent[];
  readonly result: JobResult;
}

/** Creates fresh topics, writes the input, runs the job bounded and returns where the output is. */
export async function runKafkaToKafkaExample(
  brokers: string[],
  events = exampleInput(),
): Promise<ExampleRun> {
  const suffix = randomBytes(4).toString("hex");
  const inputTopic = `k2k-example-events-${suffix}`;
  const outputTopic = `k2k-example-counts-${suffix}`;
  await createTopics(brokers, [inputTopic, outputTopic]);
  await produceInput(brokers, inputTopic, events);
  const checkpointDirectory = await mkdtemp(join(tmpdir(), "onceflow-k2k-example-"));
  try {
    const job = buildKafkaToKafkaJob({
      brokers,
      inputTopic,
      outputTopic,
      jobId: `k2k-example-${suffix}`,
      groupId: `k2k-example-${suffix}`,
      transactionalIdPrefix: `k2k-example-${suffix}`,
      checkpointDirectory,
      checkpointInterval: 500,
      parallelism: 2,
    });
    const result = await job.execute();
    return { inputTopic, outputTopic, events, result };
  } finally {
    await rm(checkpointDirectory, { recursive: true, force: true });
  }
}

/** Brokers from `--brokers` or ONCEFLOW_KAFKA_BROKERS. */
export function brokersFromCommandLine(): string[] {
  const { values } = parseArgs({ options: { brokers: { type: "string" } }, strict: false });
  const given = typeof values.brokers === "string" ? values.brokers : process.env.ONCEFLOW_KAFKA_BROKERS;
  if (given === undefined || given.trim() === "")
    throw new Error(
      "pass --brokers host:port or set ONCEFLOW_KAFKA_BROKERS (no broker? `npx onceflow-testkit kafka` starts one and prints the line)",
    );
  return given.split(",").map((broker) => broker.trim());
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const brokers = brokersFromCommandLine();
  const run = await runKafkaToKafkaExample(brokers);
  const expected = expectedCounts(run.events);
  const counts = await readCommittedCounts(brokers, run.outputTopic, expected.size);
  console.log(
    `read ${run.events.length} events from ${run.inputTopic}; job ended by ${run.result.endedBy} after checkpoint ${run.result.lastCheckpointId}`,
  );
  console.log(`${counts.length} window counts in ${run.outputTopic} (read_committed):`);
  const sorted = [...counts].sort((a, b) => a.windowStart - b.windowStart || a.key.localeCompare(b.key));
  for (const count of sorted)
    console.log(`${new Date(count.windowStart).toISOString()}  ${count.key}\t${count.count}`);
}
