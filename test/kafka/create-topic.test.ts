import { createKafkaTopic } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { kafkaBrokers, uniqueName } from "./helpers/kafka.js";

// Right after topic creation a loaded broker may name a leader that does not serve
// the partition yet ("This server is not the leader for that topic-partition" from ListOffsets).
// createKafkaTopic waits until ListOffsets answers, so a test may read offsets at once, without retries.

describe("createKafkaTopic (testkit)", { timeout: 120_000 }, () => {
  it("returns only once every partition answers ListOffsets, even with several topics created at once", async () => {
    const names = Array.from({ length: 4 }, () => uniqueName("created"));
    await Promise.all(names.map((name) => createKafkaTopic(kafkaBrokers(), name, { partitions: 6 })));
    const admin = new Kafka({
      brokers: kafkaBrokers(),
      clientId: "create-topic-test",
      logLevel: logLevel.NOTHING,
      retry: { retries: 0 },
    }).admin();
    await admin.connect();
    try {
      for (const name of names) {
        const offsets = await admin.fetchTopicOffsets(name);
        const rows = offsets.map((offset) => [offset.partition, offset.low, offset.high]);
        expect(rows.sort((a, b) => Number(a[0]) - Number(b[0]))).toEqual(
          Array.from({ length: 6 }, (_, partition) => [partition, "0", "0"]),
        );
        expect(await admin.fetchTopicOffsetsByTimestamp(name, Date.now())).toHaveLength(6);
      }
    } finally {
      await admin.disconnect();
    }
  });
});
