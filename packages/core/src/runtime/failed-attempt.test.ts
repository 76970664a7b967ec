import { describe, expect, it } from "vitest";
import type { CompletedCheckpoint } from "../checkpoint/checkpoint-storage.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { OnceflowError } from "../errors/onceflow-error.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

// Nothing prepared outlives its attempt: a job that fails for good leaves nothing pre-committed behind —
// what a stored checkpoint holds is committed on close (a failed job must not keep its locks), and
// what only a failed checkpoint held is aborted.

/** Stores checkpoint `slowId` only after `delayMs`, and says when its store began. */
class SlowStore extends MemoryCheckpointStorage {
  storing = false;

  constructor(
    private readonly slowId: number,
    private readonly delayMs: number,
  ) {
    super();
  }

  override async store(checkpoint: CompletedCheckpoint): Promise<void> {
    if (checkpoint.metadata.checkpointId === this.slowId) {
      this.storing = true;
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    }
    return super.store(checkpoint);
  }
}

function failingJob(storage: SlowStore, output: CollectedOutput<number>): Job {
  const job = new Job({
    jobId: "failed-attempt",
    parallelism: 2,
    checkpointing: { interval: 100, storage },
    restartStrategy: { type: "fixed-delay", attempts: 3, delay: 10 },
  });
  job
    .fromSource(
      new GeneratorSource<number>({
        count: 100_000,
        splits: 2,
        generate: (index) => index,
        recordsPerSecond: 2_000,
      }),
      {
        uid: "numbers",
      },
    )
    .map((value) => {
      // A record the external system refuses for good, while checkpoint 2 is being stored.
      if (storage.storing)
        throw new OnceflowError("RECORD_REJECTED", `record ${value} violates a constraint`);
      return value;
    })
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

describe("an attempt that fails for good", () => {
  it("commits what its last stored checkpoint holds and leaves nothing pre-committed", async () => {
    const storage = new SlowStore(2, 500);
    const output = new CollectedOutput<number>();
    const error = await failingJob(storage, output)
      .execute()
      .catch((caught: unknown) => caught);
    expect((error as OnceflowError).code).toBe("RECORD_REJECTED");
    expect((await storage.list("failed-attempt")).map((metadata) => metadata.checkpointId)).toContain(2);
    expect(output.pending).toEqual([]);
    // Everything checkpoint 2 covered is visible: nothing was lost to the failure.
    const committed = new Set(output.committed);
    expect(committed.size).toBe(output.committed.length);
    expect(committed.size).toBeGreaterThan(0);
  }, 30_000);
});
