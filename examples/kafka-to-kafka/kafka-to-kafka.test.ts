import { readCommittedKafkaRecords as readCommittedRecords } from "@onceflow/testkit";
import { describe, expect, it } from "vitest";
import { sharedKafkaBrokers } from "../../test/chaos/kafka-services.js";
import { exampleInput, runKafkaToKafkaExample, type WindowCount } from "./main.js";

describe("examples/kafka-to-kafka", () => {
  it("writes each (key, 10 s window) count exactly once, read back by an independent read_committed reader", {
    timeout: 40_000,
  }, async () => {
    const brokers = sharedKafkaBrokers();
    const events = exampleInput(300);
    const run = await runKafkaToKafkaExample(brokers, events);
    expect(run.result.endedBy).toBe("end-of-input");

    // The expected counts, computed here from the input rather than by the example's code.
    const expected = new Map<string, number>();
    for (const event of events) {
      const id = `${event.key}@${Math.floor(event.timestamp / 10_000) * 10_000}`;
      expected.set(id, (expected.get(id) ?? 0) + 1);
    }

    // The testkit's read_committed reader: neither onceflow's source nor the example's own reader.
    // EndTxn returns before the broker wrote the commit markers, so the last transaction may become
    // readable a moment after the job ended: poll, then read once more to catch a late duplicate.
    for (let attempt = 0; attempt < 100; attempt++) {
      if ((await readCommittedRecords(brokers, run.outputTopic)).length >= expected.size) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    const records = await readCommittedRecords(brokers, run.outputTopic);
    const actual = new Map<string, number>();
    for (const record of records) {
      const count = JSON.parse(record.value ?? "null") as WindowCount;
      expect(record.key).toBe(count.key);
      expect(count.windowEnd - count.windowStart).toBe(10_000);
      const id = `${count.key}@${count.windowStart}`;
      // A second record for the same window would be a duplicate (no replay may leak through).
      expect(actual.has(id), `duplicate count for ${id}`).toBe(false);
      actual.set(id, count.count);
    }
    expect(actual).toEqual(expected);
    expect([...actual.values()].reduce((a, b) => a + b, 0)).toBe(300);
  });
});
