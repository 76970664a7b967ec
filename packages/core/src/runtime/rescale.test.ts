import { describe, expect, it, vi } from "vitest";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";
import { type Counted, type Reading, RunningCount } from "./testing/running-count.js";

const RECORDS = 6_000;
const SPLITS = 6;
const KEYS = 12;

function buildJob(
  parallelism: number,
  storage: MemoryCheckpointStorage,
  output: CollectedOutput<Counted>,
  options: { subtaskIndex?: number; recordsPerSecond?: number; partitionedBySplit?: boolean } = {},
): Job {
  const job = new Job({
    jobId: "rescale",
    parallelism,
    ...(options.subtaskIndex === undefined ? {} : { subtaskIndex: options.subtaskIndex }),
    checkpointing: { interval: 50, storage },
    restartStrategy: { type: "none" },
  });
  const readings = job.fromSource(
    new GeneratorSource<Reading>({
      count: RECORDS,
      splits: SPLITS,
      generate: (index) => ({ index, key: `key-${index % KEYS}` }),
      recordsPerSecond: options.recordsPerSecond ?? 10_000,
    }),
    { uid: "readings" },
  );
  // Key i%12 always reads on split i%6: one process per subtask (no exchange) may say the input is
  // partitioned by the key, and keyed state then follows the split on rescale.
  const keyed = options.partitionedBySplit
    ? readings.reinterpretAsKeyedStream((reading) => reading.key)
    : readings.keyBy((reading) => reading.key);
  keyed.process(() => new RunningCount(), { uid: "count" }).sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

async function checkpointAtTwoThenRestoreAt(parallelism: number): Promise<Counted[]> {
  const storage = new MemoryCheckpointStorage();
  const output = new CollectedOutput<Counted>();
  const first = buildJob(2, storage, output);
  const firstRun = first.execute();
  // Stopped mid-input, once a checkpoint committed something (not by the clock: CI may be loaded).
  await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(0), { timeout: 10_000 });
  first.stop();
  const firstResult = await firstRun;
  expect(firstResult.endedBy).toBe("stop");
  const committedBeforeRescale = output.committed.length;
  expect(committedBeforeRescale).toBeGreaterThan(0);
  expect(committedBeforeRescale).toBeLessThan(RECORDS);

  const second = await buildJob(parallelism, storage, output).execute();
  expect(second.endedBy).toBe("end-of-input");
  // A rescale starts a new lineage: its base checkpoint (the old state redistributed) comes next.
  expect(second.restoredCheckpointId).toBe(firstResult.lastCheckpointId + 1);
  const base = (await storage.list("rescale")).find((metadata) => metadata.scope === "base");
  expect(base?.checkpointId).toBe(firstResult.lastCheckpointId + 1);
  expect(base?.parallelism).toBe(parallelism);
  return output.committed;
}

function expectExactlyOnceWithContinuousCounts(committed: readonly Counted[]): void {
  expect(committed).toHaveLength(RECORDS);
  expect(new Set(committed.map((record) => record.index)).size).toBe(RECORDS);
  // Per key, counts are 1..n without gaps or repeats: the keyed state survived the rescale.
  const countsByKey = new Map<string, number[]>();
  for (const record of committed)
    countsByKey.set(record.key, [...(countsByKey.get(record.key) ?? []), record.count]);
  for (const [key, counts] of countsByKey) {
    const sorted = [...counts].sort((a, b) => a - b);
    expect(sorted, key).toEqual(Array.from({ length: RECORDS / KEYS }, (_, index) => index + 1));
  }
}

describe("rescaling a checkpoint", () => {
  it("restores a parallelism-2 checkpoint at parallelism 3 with the same output", async () => {
    expectExactlyOnceWithContinuousCounts(await checkpointAtTwoThenRestoreAt(3));
  });

  it("restores a parallelism-2 checkpoint at parallelism 1 with the same output", async () => {
    expectExactlyOnceWithContinuousCounts(await checkpointAtTwoThenRestoreAt(1));
  });

  it("restores per-process checkpoints (one subtask per process) at another parallelism", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    // Two "processes", each running one subtask and checkpointing on its own scope.
    const processes = [0, 1].map((subtaskIndex) =>
      buildJob(2, storage, output, { subtaskIndex, recordsPerSecond: 5_000, partitionedBySplit: true }),
    );
    const runs = processes.map((job) => job.execute());
    await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(0), { timeout: 10_000 });
    for (const job of processes) job.stop();
    await Promise.all(runs);
    const scopes = new Set((await storage.list("rescale")).map((metadata) => metadata.scope));
    expect(scopes).toEqual(new Set(["subtask-0-of-2", "subtask-1-of-2"]));

    await buildJob(3, storage, output, { partitionedBySplit: true }).execute();
    expectExactlyOnceWithContinuousCounts(output.committed);
  });
});
