import { describe, expect, it } from "vitest";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { Source, SourceReader, SourceSplit } from "../source/source.js";
import { WatermarkStrategy } from "../time/watermark-strategy.js";
import { countAggregate } from "../window/aggregate-function.js";
import { TumblingEventTimeWindows } from "../window/window-assigners.js";
import { Job } from "./job.js";

/** An unbounded source with one split that never has a record, like a quiet Kafka topic. */
const silentSource: Source<{ key: string; at: number }, SourceSplit> = {
  name: "silent",
  boundedness: "continuous",
  discoverSplits: async () => [{ splitId: "quiet-0" }],
  createReader: (): SourceReader<{ key: string; at: number }, SourceSplit> => {
    let splits: SourceSplit[] = [];
    let closed = false;
    return {
      addSplits: (added) => {
        splits = [...splits, ...added];
      },
      pollNext: () => undefined,
      isAvailable: () => new Promise<void>((resolve) => setTimeout(resolve, closed ? 0 : 50)),
      isFinished: () => false,
      snapshotState: () => splits,
      close: async () => {
        closed = true;
      },
    };
  },
};

async function windowsFiredWithQuietSource(idleness: number | undefined, parallelism = 1): Promise<number> {
  const output = new CollectedOutput<number>();
  const job = new Job({
    jobId: "idle",
    parallelism,
    checkpointing: { interval: 100, storage: "memory" },
    restartStrategy: { type: "none" },
  });
  const busy = job.fromSource(
    new GeneratorSource({
      splits: parallelism,
      generate: (index) => ({ key: `k${index % 3}`, at: index }),
      timestampOf: (index) => index,
      recordsPerSecond: 5000,
    }),
    { uid: "busy", watermarks: WatermarkStrategy.forMonotonousTimestamps() },
  );
  const quietStrategy = WatermarkStrategy.forMonotonousTimestamps<{ key: string; at: number }>();
  const quiet = job.fromSource(silentSource, {
    uid: "quiet",
    watermarks: idleness === undefined ? quietStrategy : quietStrategy.withIdleness(idleness),
  });
  busy
    .union(quiet)
    .keyBy((event) => event.key)
    .window(TumblingEventTimeWindows.of(100))
    .aggregate(countAggregate(), undefined, { uid: "count" })
    .sinkTo(output.sinkFactory(), { uid: "out" });
  setTimeout(() => job.stop(), 1200);
  await job.execute();
  return output.committed.length;
}

describe("idleness", () => {
  it.each([1, 2])(
    "an idle source does not hold back the watermark of a union (parallelism %i)",
    async (parallelism) => {
      expect(await windowsFiredWithQuietSource(150, parallelism)).toBeGreaterThan(10);
    },
  );

  it.each([1, 2])(
    "without idleness the quiet source holds every window back (parallelism %i)",
    async (parallelism) => {
      expect(await windowsFiredWithQuietSource(undefined, parallelism)).toBe(0);
    },
  );

  it("a subtask without a split does not hold back the watermark behind the exchange", async () => {
    const output = new CollectedOutput<number>();
    const job = new Job({
      jobId: "no-split",
      parallelism: 2,
      checkpointing: { interval: 100, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(
        new GeneratorSource({
          splits: 1,
          generate: (index) => ({ key: `k${index % 3}`, at: index }),
          timestampOf: (index) => index,
          recordsPerSecond: 5000,
        }),
        { uid: "busy", watermarks: WatermarkStrategy.forMonotonousTimestamps() },
      )
      .keyBy((event) => event.key)
      .window(TumblingEventTimeWindows.of(100))
      .aggregate(countAggregate(), undefined, { uid: "count" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    setTimeout(() => job.stop(), 1200);
    await job.execute();
    expect(output.committed.length).toBeGreaterThan(10);
  });
});
