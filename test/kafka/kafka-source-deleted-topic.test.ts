import { KafkaSource, MissingPartitionMetricNames } from "@onceflow/connector-kafka";
import { describe, expect, it } from "vitest";
import { openReader, pollRecords } from "./helpers/drive-source.js";
import { createTopic, kafkaBrokers, produce, sleep, uniqueName, withAdmin } from "./helpers/kafka.js";

const values = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) => ({ value: `${prefix}${i}` }));

/** Polls `check` until it holds (the reader works in the background); fails with its last value. */
async function eventually<T>(read: () => T, check: (value: T) => boolean): Promise<T> {
  let value = read();
  for (let round = 0; round < 300 && !check(value); round++) {
    await sleep(100);
    value = read();
  }
  return value;
}

/** Creates `topic` again once the broker has finished deleting it. */
async function recreate(topic: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await createTopic(topic, 1);
      return;
    } catch (error) {
      if (attempt >= 100) throw error;
      await sleep(200);
    }
  }
}

/** Two topics read by one reader; the second is deleted once both were read. */
async function readThenDelete(onMissingPartition?: "wait" | "drop") {
  const [alive, doomed] = [uniqueName("src-alive"), uniqueName("src-doomed")];
  await createTopic(alive, 1);
  await createTopic(doomed, 1);
  await produce(doomed, values(100, "d"));
  await produce(alive, values(10, "a"));
  const source = new KafkaSource({
    brokers: kafkaBrokers(),
    topics: [alive, doomed],
    startingOffsets: "earliest",
    partitionDiscoveryIntervalMs: 0,
    ...(onMissingPartition === undefined ? {} : { onMissingPartition }),
  });
  const opened = await openReader(source);
  expect(await pollRecords(opened.reader, 110)).toHaveLength(110);
  await withAdmin((admin) => admin.deleteTopics({ topics: [doomed] }));
  return { alive, doomed, ...opened };
}

describe("KafkaSource with a deleted topic", () => {
  it("reads the other topics on and waits for the deleted one (the default)", async () => {
    const { alive, doomed, reader, metrics, logger } = await readThenDelete();
    try {
      // The deleted partition's errors are its own: every Fetch still carries the other topic.
      for (let round = 0; round < 5; round++) {
        await produce(alive, values(20, `a${round}-`));
        const records = await pollRecords(reader, 20);
        expect(records.map((r) => r.topic)).toEqual(Array(20).fill(alive));
      }
      expect(
        await eventually(
          () => metrics.read(MissingPartitionMetricNames.missingPartitions),
          (n) => n === 1,
        ),
      ).toBe(1);
      expect(logger.entries.some((e) => e.level === "warn" && e.fields.topic === doomed)).toBe(true);
      // Still assigned, at its position: a checkpoint keeps it.
      expect(reader.snapshotState(1).find((s) => s.topic === doomed)?.nextOffset).toBe("100");

      // A topic of that name comes back: read from its start (the old position is out of range).
      await recreate(doomed);
      await produce(doomed, values(3, "new"));
      const again = await pollRecords(reader, 3);
      expect(again.map((r) => [r.topic, r.value])).toEqual([
        [doomed, "new0"],
        [doomed, "new1"],
        [doomed, "new2"],
      ]);
      expect(metrics.read(MissingPartitionMetricNames.missingPartitions)).toBe(0);
    } finally {
      await reader.close();
      await withAdmin((admin) => admin.deleteTopics({ topics: [alive, doomed] })).catch(() => undefined);
    }
  });

  it('with onMissingPartition "drop", forgets the deleted partition and reads the others on', async () => {
    const { alive, doomed, reader, metrics } = await readThenDelete("drop");
    try {
      await produce(alive, values(50, "b"));
      const records = await pollRecords(reader, 50);
      expect(records.map((r) => r.topic)).toEqual(Array(50).fill(alive));
      const splits = await eventually(
        () => reader.snapshotState(1).map((s) => s.topic),
        (topics) => !topics.includes(doomed),
      );
      expect(splits).toEqual([alive]);
      expect(metrics.read(MissingPartitionMetricNames.partitionsDropped)).toBe(1);
      expect(metrics.read(MissingPartitionMetricNames.missingPartitions)).toBe(0);
      await produce(alive, values(5, "c"));
      expect(await pollRecords(reader, 5)).toHaveLength(5);
    } finally {
      await reader.close();
      await withAdmin((admin) => admin.deleteTopics({ topics: [alive] })).catch(() => undefined);
    }
  });

  it("refuses an unknown policy with a ConfigurationError naming the option", () => {
    expect(
      () =>
        new KafkaSource({
          brokers: kafkaBrokers(),
          topics: ["t"],
          onMissingPartition: "skip" as "drop",
        }),
    ).toThrow(/onMissingPartition/);
  });
});
