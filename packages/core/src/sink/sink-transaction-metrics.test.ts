import { afterEach, describe, expect, it, vi } from "vitest";
import { MetricNames } from "../observability/metrics.js";
import { RecordingSink, SinkJournal } from "./testing/recording-sink.js";
import { SinkTestHarness } from "./testing/sink-test-harness.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("a two-phase-commit sink's transaction metrics", () => {
  it("reports pending transactions, the oldest one's age at each read, and commit durations", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(1_000_000);
    const sink = new RecordingSink(new SinkJournal(), {});
    const harness = new SinkTestHarness(sink);
    const { metrics } = harness;
    await harness.initialize();
    expect(metrics.read(MetricNames.sinkPendingTransactions)).toBe(0);
    expect(metrics.read(MetricNames.sinkOldestPendingTransactionAgeSeconds)).toBe(0);

    await harness.write("a");
    await harness.snapshot(1);
    vi.setSystemTime(1_002_000);
    await harness.write("b");
    await harness.snapshot(2);
    expect(metrics.read(MetricNames.sinkPendingTransactions)).toBe(2);
    // The first transaction began at 1 000 000; the age grows with time alone, read after read.
    vi.setSystemTime(1_005_000);
    expect(metrics.read(MetricNames.sinkOldestPendingTransactionAgeSeconds)).toBe(5);
    vi.setSystemTime(1_007_500);
    expect(metrics.read(MetricNames.sinkOldestPendingTransactionAgeSeconds)).toBe(7.5);

    await harness.notifyComplete(2);
    expect(metrics.read(MetricNames.sinkPendingTransactions)).toBe(0);
    expect(metrics.read(MetricNames.sinkOldestPendingTransactionAgeSeconds)).toBe(0);
    expect(metrics.observations(MetricNames.sinkCommitDurationSeconds)).toHaveLength(2);
  });
});
