// Compressed topics against the Apache Kafka Java client: what its producer writes with each
// compression.type, KafkaSource reads; what KafkaSink writes with each codec, the Java consumer reads
// (read_committed), also when a batch the topic refuses as too large is split.
import { randomBytes } from "node:crypto";
import { type CompressionType, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { ConfigurationError } from "@onceflow/core";
import { createKafkaTopic } from "@onceflow/testkit";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { openReader, pollRecords } from "./helpers/drive-source.js";
import { createTopic, kafkaBrokers, uniqueName } from "./helpers/kafka.js";
import { type JavaRecord, javaConsume, javaProduce, javaTopicBytes } from "./java-client/java-client.js";

const CODECS = ["gzip", "snappy", "lz4", "zstd"] as const;

/** Records as the Java producer writes them: keys, nulls, repeated and null headers. */
function javaRecords(codec: string, count: number, partitions: number): JavaRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    key: i % 7 === 0 ? null : `k${i}`,
    value: i % 11 === 0 ? null : `${codec}-value-${i} ${"compressible ".repeat(i % 20)}`,
    partition: i % partitions,
    headers:
      i % 3 === 0
        ? [
            ["rep", `${i}`],
            ["none", null],
            ["rep", "again"],
          ]
        : [],
  }));
}

describe("KafkaSource reads what the Java producer compressed", () => {
  for (const codec of CODECS) {
    it(`compression.type=${codec}: every record, keys, values and headers as the Java consumer reads them`, async () => {
      const topic = await createTopic(uniqueName(`src-java-${codec}`), 2);
      // linger.ms and a small batch.size: many batches of several records, some of them large.
      await javaProduce(kafkaBrokers(), topic, javaRecords(codec, 600, 2), {
        "compression.type": codec,
        "linger.ms": 50,
        "batch.size": 4096,
      });
      const javaRead = await javaConsume(kafkaBrokers(), topic);
      expect(javaRead).toHaveLength(600);
      const source = new KafkaSource({
        brokers: kafkaBrokers(),
        topics: [topic],
        startingOffsets: "earliest",
        stoppingOffsets: "latest",
      });
      const { reader } = await openReader(source);
      try {
        const records = await pollRecords(reader, 600);
        const ours = records.map((r) => ({
          partition: r.partition,
          offset: Number(r.offset),
          key: r.key,
          value: r.value,
          headers: r.headers,
        }));
        const theirs = javaRead.map((r) => ({
          partition: r.partition,
          offset: r.offset,
          key: r.key,
          value: r.value,
          headers: headersObject(r.headers),
        }));
        const order = (a: { partition: number; offset: number }, b: { partition: number; offset: number }) =>
          a.partition - b.partition || a.offset - b.offset;
        expect(ours.sort(order)).toEqual(theirs.sort(order));
      } finally {
        await reader.close();
      }
    });
  }
});

/** The source's header object of a header list: a repeated name gives an array, in order. */
function headersObject(list: ReadonlyArray<readonly [string, string | null]>): Record<string, unknown> {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of list) {
    if (!(name in headers)) headers[name] = value;
    else if (Array.isArray(headers[name])) (headers[name] as unknown[]).push(value);
    else headers[name] = [headers[name], value];
  }
  return headers;
}

describe("KafkaSink compresses as the Java consumer reads", () => {
  const values = Array.from(
    { length: 3_000 },
    (_, i) => `k${i % 5}:${i}:${"the same words again ".repeat(10)}`,
  );

  // Every codec under exactly-once; at-least-once seals batches on the same path (one codec shows it).
  const cases = [
    ...CODECS.map((compression) => ({ compression, guarantee: "exactly-once" as const })),
    { compression: "zstd" as const, guarantee: "at-least-once" as const },
  ];
  for (const { compression, guarantee } of cases) {
    it(`compression "${compression}", ${guarantee}: the Java consumer reads every record, in order per key, stored compressed`, async () => {
      const topic = await createTopic(uniqueName(`sink-${compression}`), 2);
      const driver = await SinkDriver.start(
        new KafkaSink<string>({
          brokers: kafkaBrokers(),
          topic,
          deliveryGuarantee: guarantee,
          transactionalIdPrefix: uniqueName(`compressed-${compression}`),
          key: { serialize: (value) => value.slice(0, 2) },
          headers: (value) => ({ n: value.split(":")[1] as string }),
          compression,
        }),
      );
      try {
        for (let i = 0; i < values.length; i += 500) await driver.write(values.slice(i, i + 500));
        await driver.checkpoint(1);
        await driver.complete(1);
      } finally {
        await driver.close();
      }
      const read = await javaConsume(kafkaBrokers(), topic);
      expect(read.map((r) => r.value).sort()).toEqual([...values].sort());
      for (let k = 0; k < 5; k++) {
        const ofKey = read.filter((r) => r.key === `k${k}`).map((r) => r.value);
        expect(ofKey).toEqual(values.filter((_, i) => i % 5 === k));
      }
      for (const r of read) expect(r.headers).toEqual([["n", r.value?.split(":")[1]]]);
      // Stored compressed: far less than the records' own bytes (about 650 KB).
      const payload = values.reduce((sum, value) => sum + value.length, 0);
      expect(await javaTopicBytes(kafkaBrokers(), topic)).toBeLessThan(payload / 4);
    });
  }

  it("without the option writes uncompressed batches, as the Java producer's default", async () => {
    const topic = await createTopic(uniqueName("sink-uncompressed"), 1);
    const driver = await SinkDriver.start(new KafkaSink<string>({ brokers: kafkaBrokers(), topic }));
    try {
      await driver.write(values);
      await driver.checkpoint(1);
      await driver.complete(1);
    } finally {
      await driver.close();
    }
    expect((await javaConsume(kafkaBrokers(), topic)).map((r) => r.value)).toEqual(values);
    const payload = values.reduce((sum, value) => sum + value.length, 0);
    expect(await javaTopicBytes(kafkaBrokers(), topic)).toBeGreaterThan(payload);
  });

  for (const compression of CODECS) {
    it(`compression "${compression}": batches the topic refuses as too large are split and written once, in order`, async () => {
      const topic = uniqueName(`sink-split-${compression}`);
      await createKafkaTopic(kafkaBrokers(), topic, {
        partitions: 1,
        config: { "max.message.bytes": "65536" },
      });
      // Random bytes do not compress: the sink's 256 KiB batches stay about four times the limit.
      const large = Array.from({ length: 400 }, (_, i) => `${i}:${randomBytes(5 * 1024).toString("base64")}`);
      const driver = await SinkDriver.start(
        new KafkaSink<string>({
          brokers: kafkaBrokers(),
          topic,
          deliveryGuarantee: "exactly-once",
          transactionalIdPrefix: uniqueName("compressed-split"),
          compression,
        }),
      );
      try {
        for (let i = 0; i < large.length; i += 100) await driver.write(large.slice(i, i + 100));
        await driver.checkpoint(1);
        await driver.complete(1);
      } finally {
        await driver.close();
      }
      expect((await javaConsume(kafkaBrokers(), topic)).map((r) => r.value)).toEqual(large);
    });
  }

  it("refuses a compression Kafka does not have, naming the option", () => {
    expect(
      () =>
        new KafkaSink<string>({
          brokers: kafkaBrokers(),
          topic: "t",
          compression: "brotli" as CompressionType,
        }),
    ).toThrow(ConfigurationError);
  });
});
