import { describe, expect, it, vi } from "vitest";
import type { CheckpointStorage, CompletedCheckpoint } from "../checkpoint/checkpoint-storage.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { OnceflowError } from "../errors/onceflow-error.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

// One live process per scope: a frozen process that comes back after its replacement started
// can neither store a checkpoint nor restart over it; it stops with SUPERSEDED, whatever its
// restart strategy, and the replacement's output stays exactly once.

/** One process's view of the shared storage: `freeze()` holds its stores, `resume()` lets them go. */
function frozenView(shared: CheckpointStorage): CheckpointStorage & { freeze(): void; resume(): void } {
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  return {
    description: shared.description,
    list: (jobId) => shared.list(jobId),
    load: (jobId, scope, id) => shared.load(jobId, scope, id),
    discard: (jobId, scope, id) => shared.discard(jobId, scope, id),
    claimIncarnation: (jobId, scope, options) => shared.claimIncarnation(jobId, scope, options),
    claimedScopes: (jobId) => shared.claimedScopes(jobId),
    describeIncarnations: (jobId) => shared.describeIncarnations(jobId),
    recordHistory: (entry, keep) => shared.recordHistory(entry, keep),
    readHistory: (jobId) => shared.readHistory(jobId),
    async store(checkpoint: CompletedCheckpoint) {
      await gate;
      return shared.store(checkpoint);
    },
    freeze() {
      gate = new Promise((resolve) => {
        open = resolve;
      });
    },
    resume() {
      open?.();
      gate = undefined;
    },
  };
}

function numbersJob(
  storage: CheckpointStorage,
  output: CollectedOutput<number>,
  count: number,
  rate: number,
): Job {
  const job = new Job({
    jobId: "zombie",
    checkpointing: { interval: 50, timeout: 60_000, storage },
    restartStrategy: { type: "fixed-delay", attempts: 5, delay: 10 },
  });
  job
    .fromSource(
      new GeneratorSource<number>({ count, splits: 2, generate: (index) => index, recordsPerSecond: rate }),
      {
        uid: "numbers",
      },
    )
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

describe("a frozen process that comes back after it was replaced", () => {
  it("stops with SUPERSEDED and never stores, commits or restarts over its replacement", async () => {
    const shared = new MemoryCheckpointStorage();
    const output = new CollectedOutput<number>();
    const oldView = frozenView(shared);
    const old = numbersJob(oldView, output, 4_000, 2_000);
    const oldRun = old.execute().then(
      () => "ended normally",
      (error: unknown) => error,
    );
    await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(200), { timeout: 10_000 });
    oldView.freeze(); // its next store hangs: the process is frozen (SIGSTOP) as far as anyone can see
    const committedWhenFrozen = output.committed.length;

    const replacementRun = numbersJob(shared, output, 4_000, 3_000).execute();
    await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(committedWhenFrozen + 300), {
      timeout: 10_000,
    });
    oldView.resume(); // SIGCONT while the replacement is still running
    const outcome = await oldRun;
    const replacement = await replacementRun;
    expect(replacement.endedBy).toBe("end-of-input");
    expect(outcome).toBeInstanceOf(OnceflowError);
    expect((outcome as OnceflowError).code).toBe("SUPERSEDED");
    expect(new Set(output.committed).size).toBe(4_000);
    expect(output.committed).toHaveLength(4_000);
    expect(output.pending).toEqual([]); // the zombie aborted what its refused checkpoint carried
  }, 60_000);
});
