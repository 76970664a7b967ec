import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, uniqueName } from "../helpers/kafka.js";
import { javaConsume, javaProduce } from "./java-client.js";

describe("the Java client harness", () => {
  it("writes records with the given settings and reads them back read_committed, headers in order", async () => {
    const topic = await createTopic(uniqueName("java-harness"), 2);
    const written = await javaProduce(
      kafkaBrokers(),
      topic,
      [
        {
          key: "a",
          value: "one",
          partition: 0,
          headers: [
            ["rep", "1"],
            ["other", null],
            ["rep", "2"],
          ],
        },
        { key: null, value: null, partition: 1, timestamp: 1_700_000_000_000 },
        { key: "c", value: "three", partition: 0 },
      ],
      { "transactional.id": `${topic}-tx`, "compression.type": "gzip" },
    );
    expect(written).toEqual([
      { partition: 0, offset: 0 },
      { partition: 1, offset: 0 },
      { partition: 0, offset: 1 },
    ]);
    const read = await javaConsume(kafkaBrokers(), topic);
    // Partitions interleave in the consumer's output: compare in (partition, offset) order.
    const sorted = [...read].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
    expect(sorted.map(({ timestamp: _, ...record }) => record)).toEqual([
      {
        partition: 0,
        offset: 0,
        key: "a",
        value: "one",
        headers: [
          ["rep", "1"],
          ["other", null],
          ["rep", "2"],
        ],
      },
      { partition: 0, offset: 1, key: "c", value: "three", headers: [] },
      { partition: 1, offset: 0, key: null, value: null, headers: [] },
    ]);
    expect(read).toHaveLength(3);
    expect(read.find((record) => record.partition === 1)?.timestamp).toBe(1_700_000_000_000);
  });
});
