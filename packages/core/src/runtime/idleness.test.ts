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

async function windowsFiredWithQuietSource(idleness: number | undefined): Promise<number> {
  const output = new CollectedOutput<number>();
  const job = new Job({
    jobId: "idle",
    checkpointing: { interval: 100, storage: "memory" },
    restartStrategy: { type: "none" },
  });
  const busy = job.fromSource(
    new GeneratorSource({
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
  it("an idle source does not hold back the watermark of a union", async () => {
    expect(await windowsFiredWithQuietSource(150)).toBeGreaterThan(10);
  });

  it("without idleness the quiet source holds every window back", async () => {
    expect(await windowsFiredWithQuietSource(undefined)).toBe(0);
  });
});
