import { describe, expect, it } from "vitest";
import { DiscardingSink } from "./discarding-sink.js";
import { SinkTestHarness } from "./testing/sink-test-harness.js";

describe("DiscardingSink", () => {
  it("counts records from write and writeBatch, and keeps none", async () => {
    const sink = new DiscardingSink<number>();
    const context = { timestamp: undefined, currentWatermark: 0, splitId: "0" };
    expect(sink.recordCount).toBe(0);
    sink.write(1, context);
    sink.writeBatch([2, 3, 4], context);
    expect(sink.recordCount).toBe(4);
    expect(Object.values(sink).some((value) => Array.isArray(value))).toBe(false);
  });

  it("runs under the harness without taking part in checkpoints", async () => {
    const sink = new DiscardingSink<string>();
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.write("a", "b");
    const checkpoint = await harness.checkpoint(1);
    expect(checkpoint.state).toEqual({});
    expect(sink.recordCount).toBe(2);
    expect(sink.name).toBe("DiscardingSink");
  });
});
