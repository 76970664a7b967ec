/**
 * Reading compressed topics: KafkaSource against the Apache Kafka Java consumer on the same topic.
 * For each compression type the Java producer writes the topic once (its defaults: batch.size
 * 16 KiB, here linger.ms 20); then the Java consumer (read_committed, no group, `JavaConsumer
 * --timings`: from its first records to the end, JVM start left out) reads it whole ROUNDS + 1 times
 * in one JVM, and a KafkaSource reader (bounded at the latest offsets, from its first records to
 * its last) as often in this process; the first read of each (cold) is left out. Both fetch over
 * loopback from one broker, so this is decompression plus record decoding plus fetching; the
 * median of the rounds is reported, in records/s, with the ratio onceflow / Java.
 *
 *   npm run build -w @onceflow/core -w @onceflow/testkit -w @onceflow/connector-kafka
 *   node --import tsx bench/kafka/decode-compressed.mts [--records 500000] [--rounds 3]
 *     [--value-bytes 100] [--codecs none,gzip,snappy,lz4,zstd]
 *
 * Starts a private broker unless ONCEFLOW_KAFKA_BROKERS names one.
 */
import { parseArgs } from "node:util";
import { KafkaSource } from "@onceflow/connector-kafka";
import { createMemoryLogger, createMemoryMetrics } from "@onceflow/core";
import { createKafkaTopic, startKafka } from "@onceflow/testkit";
import { javaConsumeTimings, runJavaProgram } from "../../test/kafka/java-client/java-client.js";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "500000" },
    rounds: { type: "string", default: "3" },
    "value-bytes": { type: "string", default: "100" },
    codecs: { type: "string", default: "none,gzip,snappy,lz4,zstd" },
  },
});
const RECORDS = Number(args.records);
const ROUNDS = Number(args.rounds);
const VALUE_BYTES = Number(args["value-bytes"]);

const kafka = process.env.ONCEFLOW_KAFKA_BROKERS ? undefined : await startKafka({ provider: "local" });
const brokers = kafka ? [...kafka.brokers] : (process.env.ONCEFLOW_KAFKA_BROKERS as string).split(",");

/** JSON-like values: an id, a few repeating words and digits, as compressible as typical events. */
function records(): string {
  const lines: string[] = [];
  for (let i = 0; i < RECORDS; i++) {
    const value = `{"id":${i},"user":"u${i % 1000}","kind":"${["view", "click", "buy"][i % 3]}","amount":${(i * 7919) % 10000}}`;
    lines.push(JSON.stringify({ key: `u${i % 1000}`, value: value.padEnd(VALUE_BYTES, " ") }));
  }
  return lines.join("\n");
}

async function onceflowRead(topic: string): Promise<{ records: number; nanos: number }> {
  const source = new KafkaSource({
    brokers,
    topics: [topic],
    startingOffsets: "earliest",
    stoppingOffsets: "latest",
  });
  const logger = createMemoryLogger();
  const context = {
    jobId: "bench",
    operatorUid: "in",
    subtaskIndex: 0,
    parallelism: 1,
    isRestored: false,
    checkpointingInterval: undefined,
    logger,
    metrics: createMemoryMetrics(),
  };
  const reader = source.createReader(context);
  await reader.addSplits(await source.discoverSplits({ jobId: "bench", parallelism: 1, logger }));
  await reader.start?.();
  let count = 0;
  let started: bigint | undefined;
  while (!reader.isFinished()) {
    const batch = await reader.pollNext();
    if (batch === undefined) {
      await Promise.race([reader.isAvailable(), new Promise((resolve) => setTimeout(resolve, 20))]);
      continue;
    }
    started ??= process.hrtime.bigint();
    count += batch.records.length;
  }
  const nanos = Number(process.hrtime.bigint() - (started ?? process.hrtime.bigint()));
  await reader.close();
  return { records: count, nanos };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const input = records();
for (const codec of (args.codecs as string).split(",")) {
  const topic = `bench-compressed-${codec}-${Date.now()}`;
  await createKafkaTopic(brokers, topic, { partitions: 1 });
  // JavaProducer takes the records as JSON lines on its standard input.
  await runJavaProgram(
    "JavaProducer",
    [brokers.join(","), topic, `compression.type=${codec}`, "linger.ms=20"],
    {
      input,
      timeoutMs: 900_000,
    },
  );
  // Both warm: the Java consumer reads the topic ROUNDS + 1 times in one JVM, KafkaSource as often
  // in this process; the first read of each is left out.
  const javaPasses = await javaConsumeTimings(brokers, topic, { passes: ROUNDS + 1 });
  const ourPasses: Array<{ records: number; nanos: number }> = [];
  for (let round = 0; round <= ROUNDS; round++) ourPasses.push(await onceflowRead(topic));
  for (const pass of [...javaPasses, ...ourPasses]) {
    if (pass.records !== RECORDS)
      throw new Error(`${codec}: a read found ${pass.records} of ${RECORDS} records`);
  }
  const java = javaPasses.slice(1).map((pass) => RECORDS / (pass.nanos / 1e9));
  const ours = ourPasses.slice(1).map((pass) => RECORDS / (pass.nanos / 1e9));
  const line = `${codec.padEnd(6)} Java ${Math.round(median(java)).toLocaleString("en")} rec/s, onceflow ${Math.round(median(ours)).toLocaleString("en")} rec/s, onceflow / Java ${(median(ours) / median(java)).toFixed(2)}`;
  console.log(line);
}
await kafka?.stop();

console.log(`${RECORDS.toLocaleString("en")} records of ${VALUE_BYTES} bytes, median of ${ROUNDS} rounds`);
