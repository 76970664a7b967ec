import { describe, expect, it } from "vitest";
import type { IncarnationSeriesContext, RuntimeContext } from "../api/checkpointed-function.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

// Connectors that keep incarnations outside the checkpoint storage (an epoch table, transactional
// ids) compare them only within the storage's series: the runtime hands every attempt its series.
describe("RuntimeContext.incarnationSeries", () => {
  it("names the storage's series and asks it for the newest incarnation", async () => {
    const storage = new MemoryCheckpointStorage();
    const seen: RuntimeContext[] = [];
    const job = new Job({ jobId: "series", checkpointing: { interval: 50, storage } });
    job
      .fromSource(new GeneratorSource({ count: 10, generate: (id) => id }), { uid: "in" })
      .sinkTo({ open: (context) => void seen.push(context), write: () => {} }, { uid: "out" });
    await job.execute();
    const [context] = seen;
    const series = context?.incarnationSeries as IncarnationSeriesContext;
    expect(series.series).toBe((await storage.describeIncarnations("series")).series);
    expect(await series.newestIncarnation()).toBe(context?.incarnation);
    await storage.claimIncarnation("series", "all");
    expect(await series.newestIncarnation()).toBe((context?.incarnation ?? 0) + 1);
  });

  it("is absent without checkpointing", async () => {
    const seen: RuntimeContext[] = [];
    const job = new Job({ jobId: "no-series" });
    job
      .fromSource(new GeneratorSource({ count: 3, generate: (id) => id }), { uid: "in" })
      .sinkTo({ open: (context) => void seen.push(context), write: () => {} }, { uid: "out" });
    await job.execute();
    expect(seen[0]?.incarnationSeries).toBeUndefined();
  });
});
