import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  type DeserializationContext,
  Deserializers,
  type KafkaPartitionSplit,
  KafkaSource,
} from "@onceflow/connector-kafka";
import { DeserializationError, MetricNames } from "@onceflow/core";
import { ensureKafkaJars, resolveKafkaVersion } from "@onceflow/testkit";
import { describe, expect, it } from "vitest";
import { openReader, pollFor, pollRecords } from "./helpers/drive-source.js";
import {
  createTopic,
  kafkaBrokers,
  kafkaClient,
  produce,
  readAll,
  sleep,
  uniqueName,
  withAdmin,
} from "./helpers/kafka.js";

const values = (records: Array<{ value: unknown }>) => records.map((r) => r.value);
const byValue = (a: unknown, b: unknown) => String(a).localeCompare(String(b), "en", { numeric: true });

async function seed(topic: string, partitions: number, perPartition: number, prefix = "v") {
  for (let p = 0; p < partitions; p++) {
    await produce(
      topic,
      Array.from({ length: perPartition }, (_, i) => ({ value: `${prefix}${p}-${i}`, partition: p })),
    );
  }
}

async function groupOffsets(groupId: string, topic: string): Promise<Record<number, string>> {
  return withAdmin(async (admin) => {
    const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return Object.fromEntries((entry?.partitions ?? []).map((p) => [p.partition, p.offset]));
  });
}

const execFileAsync = promisify(execFile);

describe("KafkaSource start positions", () => {
  it("'earliest' reads every partition from its first record, with Kafka timestamps as event time", async () => {
    const topic = await createTopic(uniqueName("src-earliest"), 2);
    await seed(topic, 2, 5);
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "earliest" });
    const { reader } = await openReader(source);
    try {
      const records = await pollRecords(reader, 10);
      expect(values(records).sort(byValue)).toEqual([
        "v0-0",
        "v0-1",
        "v0-2",
        "v0-3",
        "v0-4",
        "v1-0",
        "v1-1",
        "v1-2",
        "v1-3",
        "v1-4",
      ]);
      for (const r of records) expect(r.eventTime).toBe(r.timestamp);
      expect(Math.abs(records[0]!.timestamp - Date.now())).toBeLessThan(60_000);
      const positions = reader.snapshotState(1).map((s) => [s.splitId, s.nextOffset]);
      expect(positions.sort()).toEqual([
        [`${topic}-0`, "5"],
        [`${topic}-1`, "5"],
      ]);
    } finally {
      await reader.close();
    }
  });

  it("'latest' reads only what is written after the start", async () => {
    const topic = await createTopic(uniqueName("src-latest"), 1);
    await seed(topic, 1, 3, "old");
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "latest" });
    const { reader } = await openReader(source);
    try {
      await produce(topic, [{ value: "new-1" }, { value: "new-2" }]);
      expect(values(await pollRecords(reader, 2))).toEqual(["new-1", "new-2"]);
      expect(await pollFor(reader, 500)).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("{ timestamp } starts at the first record at or after the timestamp", async () => {
    const topic = await createTopic(uniqueName("src-ts"), 1);
    const base = Date.now() - 100_000;
    await produce(
      topic,
      Array.from({ length: 6 }, (_, i) => ({ value: `t${i}`, timestamp: base + i * 1000 })),
    );
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: { timestamp: base + 3000 },
    });
    const { reader } = await openReader(source);
    try {
      const records = await pollRecords(reader, 3);
      expect(values(records)).toEqual(["t3", "t4", "t5"]);
      expect(records.map((r) => r.eventTime)).toEqual([base + 3000, base + 4000, base + 5000]);
    } finally {
      await reader.close();
    }
  });

  it("{ committed } starts at the group's offsets and falls back to the reset strategy", async () => {
    const topic = await createTopic(uniqueName("src-committed"), 2);
    await seed(topic, 2, 4);
    const groupId = uniqueName("group");
    await withAdmin((admin) =>
      admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: "2" }] }),
    );
    for (const [reset, expected] of [
      ["earliest", ["v0-2", "v0-3", "v1-0", "v1-1", "v1-2", "v1-3"]],
      ["latest", ["v0-2", "v0-3"]],
    ] as const) {
      const source = new KafkaSource({
        brokers: kafkaBrokers(),
        topics: [topic],
        groupId,
        startingOffsets: { committed: reset },
        commitOffsetsOnCheckpoint: false,
      });
      const { reader } = await openReader(source);
      try {
        const records = await pollRecords(reader, expected.length);
        expect(values(records).sort(byValue)).toEqual(expected);
        expect(await pollFor(reader, 300)).toEqual([]);
      } finally {
        await reader.close();
      }
    }
  });

  it("{ specific } starts each listed partition at its offset, the others at the reset strategy", async () => {
    const topic = await createTopic(uniqueName("src-specific"), 2);
    await seed(topic, 2, 4);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: { specific: [{ topic, partition: 1, offset: 3 }], reset: "latest" },
    });
    const { reader } = await openReader(source);
    try {
      expect(values(await pollRecords(reader, 1))).toEqual(["v1-3"]);
      expect(await pollFor(reader, 300)).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("{ specific } with a group: a partition not listed starts at the group's committed offset, then at the reset strategy (Flink)", async () => {
    const topic = await createTopic(uniqueName("src-specific-group"), 3);
    await seed(topic, 3, 4);
    const groupId = uniqueName("group");
    // Partition 0 listed (offset 1) and committed (3): the listed offset wins. Partition 1 is not
    // listed but committed at 2: it starts there. Partition 2 has neither: reset (earliest).
    await withAdmin((admin) =>
      admin.setOffsets({
        groupId,
        topic,
        partitions: [
          { partition: 0, offset: "3" },
          { partition: 1, offset: "2" },
        ],
      }),
    );
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      groupId,
      startingOffsets: { specific: [{ topic, partition: 0, offset: 1 }], reset: "earliest" },
      commitOffsetsOnCheckpoint: false,
    });
    const { reader } = await openReader(source);
    try {
      const expected = ["v0-1", "v0-2", "v0-3", "v1-2", "v1-3", "v2-0", "v2-1", "v2-2", "v2-3"];
      expect(values(await pollRecords(reader, expected.length)).sort(byValue)).toEqual(expected);
      expect(await pollFor(reader, 300)).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("offsets restored from a checkpoint win over the start position", async () => {
    const topic = await createTopic(uniqueName("src-restore"), 2);
    await seed(topic, 2, 5);
    const restored: KafkaPartitionSplit[] = [
      { splitId: `${topic}-0`, topic, partition: 0, nextOffset: "3" },
      { splitId: `${topic}-1`, topic, partition: 1, nextOffset: "1" },
    ];
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "latest" });
    const { reader } = await openReader(source, { restored });
    try {
      expect(values(await pollRecords(reader, 6)).sort(byValue)).toEqual([
        "v0-3",
        "v0-4",
        "v1-1",
        "v1-2",
        "v1-3",
        "v1-4",
      ]);
    } finally {
      await reader.close();
    }
  });
});

describe("KafkaSource positions and offsets", () => {
  it("snapshotState returns the position after the records handed out, not what was prefetched", async () => {
    const topic = await createTopic(uniqueName("src-snap"), 1);
    await seed(topic, 1, 50);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      maxBatchSize: 7,
    });
    const { reader } = await openReader(source);
    try {
      await reader.isAvailable();
      const batch = await reader.pollNext();
      expect(batch?.records.length).toBe(7);
      expect(reader.snapshotState(1)[0]?.nextOffset).toBe("7");
    } finally {
      await reader.close();
    }
  });

  it("commits offsets to the group only when the checkpoint completes, as the next offset to read", async () => {
    const topic = await createTopic(uniqueName("src-commit"), 2);
    await seed(topic, 2, 3);
    const groupId = uniqueName("group");
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      groupId,
      startingOffsets: "earliest",
    });
    const { reader } = await openReader(source);
    try {
      await pollRecords(reader, 6);
      reader.snapshotState(1);
      await sleep(300);
      expect(await groupOffsets(groupId, topic)).toEqual({ 0: "-1", 1: "-1" });
      await reader.notifyCheckpointComplete(1);
      expect(await groupOffsets(groupId, topic)).toEqual({ 0: "3", 1: "3" });
    } finally {
      await reader.close();
    }
  });

  it("commits nothing with commitOffsetsOnCheckpoint: false", async () => {
    const topic = await createTopic(uniqueName("src-nocommit"), 1);
    await seed(topic, 1, 3);
    const groupId = uniqueName("group");
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      groupId,
      startingOffsets: "earliest",
      commitOffsetsOnCheckpoint: false,
    });
    const { reader } = await openReader(source);
    try {
      await pollRecords(reader, 3);
      reader.snapshotState(1);
      await reader.notifyCheckpointComplete(1);
      expect(await groupOffsets(groupId, topic)).toEqual({ 0: "-1" });
    } finally {
      await reader.close();
    }
  });

  it("auto-commits handed-out offsets at the interval when checkpointing is off", async () => {
    const topic = await createTopic(uniqueName("src-auto"), 1);
    await seed(topic, 1, 4);
    const groupId = uniqueName("group");
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      groupId,
      startingOffsets: "earliest",
      autoCommit: true,
      autoCommitIntervalMs: 200,
    });
    const { reader } = await openReader(source);
    try {
      await pollRecords(reader, 4);
      const deadline = Date.now() + 5000;
      while ((await groupOffsets(groupId, topic))[0] !== "4" && Date.now() < deadline) await sleep(100);
      expect(await groupOffsets(groupId, topic)).toEqual({ 0: "4" });
    } finally {
      await reader.close();
    }
  });

  it("resets a restored offset that retention deleted to the earliest offset, with a warning", async () => {
    const topic = await createTopic(uniqueName("src-range"), 1);
    await seed(topic, 1, 8);
    await withAdmin(async (admin) => {
      await admin.fetchTopicMetadata({ topics: [topic] });
      await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "5" }] });
    });
    const restored: KafkaPartitionSplit[] = [{ splitId: `${topic}-0`, topic, partition: 0, nextOffset: "2" }];
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "earliest" });
    const { reader, logger } = await openReader(source, { restored });
    try {
      expect(values(await pollRecords(reader, 3))).toEqual(["v0-5", "v0-6", "v0-7"]);
      expect(logger.entries.some((e) => e.level === "warn" && /out of range/.test(e.message))).toBe(true);
    } finally {
      await reader.close();
    }
  });

  it("keeps what it prefetches within maxPrefetchBytes while nothing is polled (backpressure)", async () => {
    const topic = await createTopic(uniqueName("src-backpressure"), 1);
    for (let chunk = 0; chunk < 10; chunk++) {
      await produce(
        topic,
        Array.from({ length: 200 }, (_, i) => ({ value: `${chunk * 200 + i}`.padEnd(1000, "x") })),
      );
    }
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      maxPrefetchBytes: 64 * 1024,
      maxBytesPerPartition: 64 * 1024,
    });
    const { reader } = await openReader(source);
    try {
      await sleep(1500);
      // At most maxPrefetchBytes plus one record batch (a broker returns a whole batch even when it
      // is larger than the Fetch limit; each send above wrote one batch of 200 records, counted
      // as 1,064 bytes each). The 2,000 records (2.1 MB) are not all fetched.
      const buffered = (reader as unknown as { prefetcher: { bufferedBytes: number } }).prefetcher
        .bufferedBytes;
      expect(buffered).toBeGreaterThan(0);
      expect(buffered).toBeLessThanOrEqual(64 * 1024 + 200 * 1064);
      expect((await pollRecords(reader, 2000)).length).toBe(2000);
    } finally {
      await reader.close();
    }
  });

  it("moves past control records and aborted transactions (read_committed)", async () => {
    const topic = await createTopic(uniqueName("src-txn"), 1);
    const producer = kafkaClient().producer({
      transactionalId: uniqueName("txn"),
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    const committed = await producer.transaction();
    await committed.send({ topic, messages: [{ value: "c1" }, { value: "c2" }] });
    await committed.commit(); // offsets 0,1 + commit marker 2
    const aborted = await producer.transaction();
    await aborted.send({ topic, messages: [{ value: "a1" }] });
    await aborted.abort(); // offset 3 + abort marker 4
    await producer.disconnect();
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "earliest" });
    const { reader } = await openReader(source);
    try {
      expect(values(await pollRecords(reader, 2))).toEqual(["c1", "c2"]);
      const deadline = Date.now() + 5000;
      while (reader.snapshotState(1)[0]?.nextOffset !== "5" && Date.now() < deadline) {
        await reader.pollNext();
        await sleep(50);
      }
      expect(reader.snapshotState(2)[0]?.nextOffset).toBe("5");
    } finally {
      await reader.close();
    }
  });
});

describe("KafkaSource discovery and bounded mode", () => {
  it("reads partitions discovered later from the earliest offset, whatever the start position", async () => {
    const topic = await createTopic(uniqueName("src-discover"), 1);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "latest",
      partitionDiscoveryIntervalMs: 1000,
    });
    expect(source.splitDiscoveryIntervalMs).toBe(1000);
    const { reader, logger } = await openReader(source);
    try {
      await withAdmin((admin) => admin.createPartitions({ topicPartitions: [{ topic, count: 2 }] }));
      await produce(topic, [{ value: "p1-first", partition: 1 }]);
      const discovered = await source.discoverSplits({ jobId: "test", parallelism: 1, logger });
      expect(discovered.map((s) => [s.splitId, s.pendingStart])).toEqual([
        [`${topic}-0`, "initial"],
        [`${topic}-1`, "earliest"],
      ]);
      await reader.addSplits(discovered.filter((s) => s.partition === 1));
      expect(values(await pollRecords(reader, 1))).toEqual(["p1-first"]);
    } finally {
      await reader.close();
    }
  });

  it("subscribes by RegExp", async () => {
    const prefix = uniqueName("src-re");
    await createTopic(`${prefix}-a`, 1);
    await createTopic(`${prefix}-b`, 1);
    await produce(`${prefix}-a`, [{ value: "a" }]);
    await produce(`${prefix}-b`, [{ value: "b" }]);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: new RegExp(`^${prefix}-`),
      startingOffsets: "earliest",
    });
    const { reader } = await openReader(source);
    try {
      expect(values(await pollRecords(reader, 2)).sort()).toEqual(["a", "b"]);
    } finally {
      await reader.close();
    }
  });

  it("stoppingOffsets 'latest' reads up to the end offsets at start, then finishes", async () => {
    const topic = await createTopic(uniqueName("src-bounded"), 2);
    await seed(topic, 2, 3);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      stoppingOffsets: "latest",
    });
    expect(source.boundedness).toBe("bounded");
    const { reader } = await openReader(source);
    try {
      await produce(topic, [{ value: "after-start", partition: 0 }]);
      const records = await pollRecords(reader, 100);
      expect(values(records).sort(byValue)).toEqual(["v0-0", "v0-1", "v0-2", "v1-0", "v1-1", "v1-2"]);
      expect(reader.isFinished()).toBe(true);
      expect(reader.snapshotState(1).map((s) => [s.nextOffset, s.stoppingOffset])).toEqual([
        ["3", "3"],
        ["3", "3"],
      ]);
    } finally {
      await reader.close();
    }
  });

  it("stoppingOffsets { specific } and { timestamp } stop before the given position", async () => {
    const topic = await createTopic(uniqueName("src-bounded2"), 1);
    const base = Date.now() - 50_000;
    await produce(
      topic,
      Array.from({ length: 6 }, (_, i) => ({ value: `t${i}`, timestamp: base + i * 1000 })),
    );
    for (const [stoppingOffsets, expected] of [
      [{ specific: [{ topic, partition: 0, offset: 2 }] }, ["t0", "t1"]],
      [{ timestamp: base + 4000 }, ["t0", "t1", "t2", "t3"]],
    ] as const) {
      const source = new KafkaSource({
        brokers: kafkaBrokers(),
        topics: [topic],
        startingOffsets: "earliest",
        stoppingOffsets,
      });
      const { reader } = await openReader(source);
      try {
        expect(values(await pollRecords(reader, 100))).toEqual(expected);
        expect(reader.isFinished()).toBe(true);
      } finally {
        await reader.close();
      }
    }
  });
});

describe("KafkaSource deserialization", () => {
  async function badTopic() {
    const topic = await createTopic(uniqueName("src-deser"), 1);
    await produce(topic, [
      { value: '{"n":1}' },
      { key: "k-bad", value: "not json", headers: { origin: "test" } },
      { value: '{"n":3}' },
    ]);
    return topic;
  }

  it("deserializes keys, values and headers (string, JSON, Buffer)", async () => {
    const topic = await createTopic(uniqueName("src-serde"), 1);
    await produce(topic, [
      { key: "k1", value: '{"n":1}', headers: { h: "x" } },
      { key: null, value: null },
    ]);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      value: Deserializers.json<{ n: number }>(),
      headers: Deserializers.buffer(),
    });
    const { reader } = await openReader(source);
    try {
      const [first, tombstone] = await pollRecords(reader, 2);
      expect(first?.key).toBe("k1");
      expect(first?.value).toEqual({ n: 1 });
      expect(Buffer.isBuffer(first?.headers.h)).toBe(true);
      expect(String(first?.headers.h)).toBe("x");
      expect(tombstone?.key).toBeNull();
      expect(tombstone?.value).toBeNull();
    } finally {
      await reader.close();
    }
  });

  it("reads headers named like Object.prototype members (valueOf, toString, __proto__) as sent", async () => {
    const topic = await createTopic(uniqueName("src-proto-headers"), 1);
    // JSON.parse makes `__proto__` an own property (a literal would set the prototype).
    const headers = JSON.parse('{"valueOf":"once","constructor":"c","plain":"p","__proto__":"x"}');
    await produce(topic, [{ value: "v", headers }]);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      onDeserializationError: "fail",
    });
    const { reader } = await openReader(source);
    try {
      const [record] = await pollRecords(reader, 1);
      expect(record?.headers).toEqual(headers);
      expect(Object.getOwnPropertyDescriptor(record?.headers, "__proto__")?.value).toBe("x");
      expect(Object.getPrototypeOf(record?.headers)).toBe(Object.prototype);
    } finally {
      await reader.close();
    }
  });

  it("keeps a header sent without a value as null, never handing it to the deserializer", async () => {
    const topic = await createTopic(uniqueName("src-null-header"), 1);
    // Kafka allows a null header value (length -1); kafkajs cannot write one, the Java client can.
    const { libDir } = await ensureKafkaJars(resolveKafkaVersion());
    await execFileAsync("java", [
      "-cp",
      `${libDir}/*`,
      fileURLToPath(new URL("./fixtures/NullHeaderProducer.java", import.meta.url)),
      kafkaBrokers().join(","),
      topic,
    ]);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      // "fail": a header the deserializer choked on would fail the read instead of passing silently.
      onDeserializationError: "fail",
    });
    const { reader } = await openReader(source);
    try {
      const [record] = await pollRecords(reader, 1);
      expect(record?.value).toBe("v");
      expect(record?.headers).toEqual({ empty: null, repeated: ["a", null], plain: "p" });
    } finally {
      await reader.close();
    }
  });

  it("'fail' raises a DeserializationError naming topic, partition and offset", async () => {
    const topic = await badTopic();
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      value: Deserializers.json(),
    });
    const { reader } = await openReader(source);
    try {
      const error = await pollRecords(reader, 3).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DeserializationError);
      expect((error as DeserializationError).code).toBe("DESERIALIZATION_FAILED");
      expect((error as Error).message).toContain(`topic '${topic}' partition 0 offset 1`);
    } finally {
      await reader.close();
    }
  });

  it("gives a deserializer of its own a context per record, which it may keep", async () => {
    const topic = await badTopic();
    const kept: DeserializationContext[] = [];
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      value: {
        deserialize: (bytes: Buffer, context: DeserializationContext) => {
          kept.push(context);
          return bytes.toString("utf8");
        },
      },
    });
    const { reader } = await openReader(source);
    try {
      const records = await pollRecords(reader, 3);
      expect(records.map((r) => r.offset)).toEqual(["0", "1", "2"]);
      expect(kept.map((c) => ({ ...c }))).toEqual(
        ["0", "1", "2"].map((offset) => ({ topic, partition: 0, offset })),
      );
    } finally {
      await reader.close();
    }
  });

  it("'skip' drops the record and counts it", async () => {
    const topic = await badTopic();
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      value: Deserializers.json<{ n: number }>(),
      onDeserializationError: "skip",
    });
    const { reader, metrics } = await openReader(source);
    try {
      const records = await pollRecords(reader, 2);
      expect(values(records)).toEqual([{ n: 1 }, { n: 3 }]);
      expect(metrics.read(MetricNames.recordsSkipped)).toBe(1);
      expect(reader.snapshotState(1)[0]?.nextOffset).toBe("3");
    } finally {
      await reader.close();
    }
  });

  it("{ deadLetterTopic } writes the raw record with the error and its origin, then goes on", async () => {
    const topic = await badTopic();
    const dlq = await createTopic(uniqueName("src-dlq"), 1);
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      value: Deserializers.json<{ n: number }>(),
      onDeserializationError: { deadLetterTopic: dlq },
    });
    const { reader, metrics } = await openReader(source);
    try {
      expect(values(await pollRecords(reader, 2))).toEqual([{ n: 1 }, { n: 3 }]);
      expect(metrics.read(MetricNames.recordsDeadLettered)).toBe(1);
    } finally {
      await reader.close();
    }
    const [dead] = await readAll(dlq, { expected: 1 });
    expect(dead?.key).toBe("k-bad");
    expect(dead?.value).toBe("not json");
    expect(dead?.headers).toMatchObject({
      origin: "test",
      "onceflow.topic": topic,
      "onceflow.partition": "0",
      "onceflow.offset": "1",
    });
    expect(dead?.headers["onceflow.error"]).toMatch(/JSON/);
  });
});

describe("KafkaSource configuration", () => {
  it("rejects wrong settings with messages that say what to change", () => {
    expect(() => new KafkaSource({ topics: ["t"] })).toThrow(/brokers/);
    expect(() => new KafkaSource({ brokers: kafkaBrokers(), topics: [] })).toThrow(/topics/);
    expect(
      () =>
        new KafkaSource({
          brokers: kafkaBrokers(),
          topics: ["t"],
          startingOffsets: { committed: "earliest" },
        }),
    ).toThrow(/set groupId/);
  });

  it("fails discovery for a topic that does not exist", async () => {
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [uniqueName("missing")] });
    await expect(openReader(source)).rejects.toThrow(/do not exist/);
  });
});
