import { describe, expect, it } from "vitest";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { createMemoryMetrics } from "../observability/metrics.js";
import { Job } from "../runtime/job.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { WatermarkStrategy } from "../time/watermark-strategy.js";
import { countAggregate } from "./aggregate-function.js";
import { TumblingEventTimeWindows } from "./window-assigners.js";
import { LATE_RECORDS_DROPPED_METRIC } from "./window-function.js";

interface Event {
  key: string;
  index: number;
}

interface WindowCount {
  key: string;
  start: number;
  count: number;
}

const KEYS = 5;
const WINDOW = 1000;

function generatorOf(count: number, splits: number, recordsPerSecond?: number) {
  return new GeneratorSource<Event>({
    count,
    splits,
    generate: (index) => ({ key: `k${index % KEYS}`, index }),
    timestampOf: (index) => index, // one record per millisecond of event time
    ...(recordsPerSecond === undefined ? {} : { recordsPerSecond }),
  });
}

/**
 * What the window counts must be: one count per (key, window) for the whole job, whichever of the
 * splits (read by different subtasks) each record came from.
 */
function expectedCounts(count: number): WindowCount[] {
  const counts = new Map<string, WindowCount>();
  for (let index = 0; index < count; index++) {
    const key = `k${index % KEYS}`;
    const start = Math.floor(index / WINDOW) * WINDOW;
    const id = `${key}|${start}`;
    const entry = counts.get(id) ?? { key, start, count: 0 };
    entry.count++;
    counts.set(id, entry);
  }
  return sortCounts([...counts.values()]);
}

function sortCounts(counts: WindowCount[]): WindowCount[] {
  return [...counts].sort((a, b) => a.start - b.start || a.key.localeCompare(b.key) || a.count - b.count);
}

describe("event-time windows in a Job", () => {
  it("counts per key and tumbling window exactly, firing the last windows at the end of input", async () => {
    const output = new CollectedOutput<WindowCount>();
    const metrics = createMemoryMetrics();
    const job = new Job({
      jobId: "window-counts",
      parallelism: 2,
      checkpointing: { interval: 20, storage: "memory" },
      restartStrategy: { type: "none" },
      metrics,
    });
    job
      .fromSource(generatorOf(20_000, 4), {
        uid: "events",
        watermarks: WatermarkStrategy.forMonotonousTimestamps<Event>(),
      })
      .keyBy((event) => event.key)
      .window(TumblingEventTimeWindows.of(WINDOW))
      .aggregate(countAggregate<Event>(), (key, window, count) => ({ key, start: window.start, count }), {
        uid: "counts",
      })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    const result = await job.execute();
    expect(result.endedBy).toBe("end-of-input");
    expect(output.pending).toEqual([]);
    expect(sortCounts(output.committed)).toEqual(expectedCounts(20_000));
    expect(output.committed.reduce((sum, entry) => sum + entry.count, 0)).toBe(20_000);
    expect(metrics.read(LATE_RECORDS_DROPPED_METRIC)).toBe(0);
  });

  it("gives the same exact counts after a failure, a restore of the last checkpoint and a restart", async () => {
    const output = new CollectedOutput<WindowCount>();
    const storage = new MemoryCheckpointStorage();
    let thrown = false;
    let committedAtFailure = -1;
    const metrics = createMemoryMetrics();
    const job = new Job({
      jobId: "window-counts-restart",
      parallelism: 2,
      checkpointing: { interval: 20, storage },
      restartStrategy: { type: "fixed-delay", attempts: 2, delay: 10 },
      metrics,
    });
    job
      .fromSource(generatorOf(20_000, 4, 40_000), {
        uid: "events",
        watermarks: WatermarkStrategy.forMonotonousTimestamps<Event>(),
      })
      .map((event) => {
        if (event.index === 15_000 && !thrown) {
          thrown = true;
          committedAtFailure = output.committed.length;
          throw new Error("injected failure");
        }
        return event;
      })
      .keyBy((event) => event.key)
      .window(TumblingEventTimeWindows.of(WINDOW))
      .aggregate(countAggregate<Event>(), (key, window, count) => ({ key, start: window.start, count }), {
        uid: "counts",
      })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    const result = await job.execute();
    expect(thrown).toBe(true);
    expect(result.restarts).toBe(1);
    // Windows had been committed before the failure: a restart from scratch would double them.
    expect(committedAtFailure).toBeGreaterThan(0);
    expect(output.pending).toEqual([]);
    expect(sortCounts(output.committed)).toEqual(expectedCounts(20_000));
    expect(metrics.read(LATE_RECORDS_DROPPED_METRIC)).toBe(0);
  });
});
