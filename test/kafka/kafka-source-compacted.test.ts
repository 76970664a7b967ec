import { KafkaSource } from "@onceflow/connector-kafka";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { describe, expect, it } from "vitest";
import { openReader, pollRecords } from "./helpers/drive-source.js";
import { kafkaBrokers, kafkaClient, sleep, uniqueName } from "./helpers/kafka.js";

// Compaction leaves empty record batches behind: a batch whose records were all removed is kept
// (empty) when it was the last batch of an idempotent or transactional producer, so the broker
// still knows that producer's sequence and epoch. kafkajs decodes such a batch into no record at
// all; a reader that takes the next offset from decoded records only fetches the same offset
// forever, and a bounded job never ends.

async function sendIdempotent(topic: string, key: string, value: string): Promise<void> {
  const producer = kafkaClient().producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: [{ key, value }] });
  } finally {
    await producer.disconnect();
  }
}

describe("KafkaSource on a compacted topic", { timeout: 180_000 }, () => {
  it("moves past an empty record batch left by compaction (a bounded read ends)", async () => {
    const topic = uniqueName("src-compacted");
    await createKafkaTopic(kafkaBrokers(), topic, {
      partitions: 1,
      config: {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "0",
      },
    });
    // Offset 0: producer A's only batch. Offset 1: producer B overwrites the key. Offset 2, in a new
    // segment (segment.ms passed), lets the cleaner compact offsets 0 and 1: record 0 is removed,
    // and its batch stays, empty, as producer A's last batch.
    await sendIdempotent(topic, "k", "overwritten");
    await sendIdempotent(topic, "k", "kept");
    await sleep(300);
    await sendIdempotent(topic, "other", "last");
    // The log cleaner wakes up every 15 s (log.cleaner.backoff.ms).
    const deadline = Date.now() + 120_000;
    let visible: string[] = [];
    while (Date.now() < deadline) {
      const records = await readCommittedKafkaRecords(kafkaBrokers(), topic, {
        isolation: "read_uncommitted",
      });
      visible = records.map((record) => String(record.value));
      if (!visible.includes("overwritten")) break;
      await sleep(1000);
    }
    expect(visible).toEqual(["kept", "last"]);

    // A fetch size that holds the empty batch (61 bytes) but not the next one: the broker answers
    // with the empty batch alone, as it does when the empty batch is the last one below the high
    // watermark or the last stable offset.
    const source = new KafkaSource({
      brokers: kafkaBrokers(),
      topics: [topic],
      startingOffsets: "earliest",
      stoppingOffsets: "latest",
      maxBytesPerPartition: 64,
    });
    const { reader } = await openReader(source);
    try {
      const records = await pollRecords(reader, 3, 20_000);
      expect(records.map((record) => [record.offset, record.value])).toEqual([
        ["1", "kept"],
        ["2", "last"],
      ]);
      expect(reader.isFinished()).toBe(true);
    } finally {
      await reader.close();
    }
  });
});
