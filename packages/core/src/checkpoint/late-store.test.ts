import { describe, expect, it } from "vitest";
import { Job } from "../runtime/job.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { CompletedCheckpoint } from "./checkpoint-storage.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";

// A late store never lands: a checkpoint whose store timed out is declared failed only once it
// can no longer land; a store that lands after that is refused, so no later restore picks it.

/** Holds the store of one checkpoint id for a while, then lets it through to the memory storage. */
class SlowStoreOnce extends MemoryCheckpointStorage {
  readonly outcomes: string[] = [];
  private slowed = false;

  constructor(
    private readonly slowCheckpointId: number,
    private readonly delayMs: number,
  ) {
    super();
  }

  override async store(checkpoint: CompletedCheckpoint): Promise<void> {
    const { checkpointId, incarnation } = checkpoint.metadata;
    if (checkpointId === this.slowCheckpointId && !this.slowed) {
      this.slowed = true;
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    }
    try {
      await super.store(checkpoint);
      this.outcomes.push(`stored ${checkpointId}@${incarnation}`);
    } catch (error) {
      this.outcomes.push(`refused ${checkpointId}@${incarnation}: ${(error as { code?: string }).code}`);
      throw error;
    }
  }
}

function numbersJob(storage: MemoryCheckpointStorage, output: CollectedOutput<number>, count: number): Job {
  const job = new Job({
    jobId: "late",
    checkpointing: { interval: 400, timeout: 300, storage },
    restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
  });
  job
    .fromSource(
      new GeneratorSource<number>({ count, splits: 1, generate: (index) => index, recordsPerSecond: 1_500 }),
      {
        uid: "numbers",
      },
    )
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

describe("a checkpoint whose store outlives its timeout", () => {
  it("is refused when it lands late, and the job still ends exactly once", async () => {
    const storage = new SlowStoreOnce(2, 900);
    const output = new CollectedOutput<number>();
    const result = await numbersJob(storage, output, 4_000).execute();

    expect(result.restarts).toBe(1);
    // The late store of checkpoint 2 was fenced by the newer incarnation, never listed.
    const late = storage.outcomes.find((outcome) => outcome.startsWith("refused 2@"));
    expect(late).toMatch(/SUPERSEDED$/);
    const listed = await storage.list("late");
    expect(listed.every((metadata) => (metadata.incarnation ?? 0) > 1 || metadata.checkpointId < 2)).toBe(
      true,
    );
    expect(new Set(output.committed).size).toBe(4_000);
    expect(output.committed).toHaveLength(4_000);
  }, 60_000);

  it("counts as completed when it landed before the fence, and no id is used twice", async () => {
    // A store slower than the timeout by a hair: it lands while the coordinator fences, or just before.
    const storage = new SlowStoreOnce(2, 320);
    const output = new CollectedOutput<number>();
    await numbersJob(storage, output, 3_000).execute();
    const ids = (await storage.list("late")).map((metadata) => metadata.checkpointId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(output.committed).size).toBe(3_000);
    expect(output.committed).toHaveLength(3_000);
  }, 60_000);
});
