import {
  CheckpointError,
  CollectedOutput,
  GeneratorSource,
  Job,
  MemoryCheckpointStorage,
} from "@onceflow/core";
import { afterEach, describe, expect, it } from "vitest";
import { faultyCheckpointStorage } from "./faulty-checkpoint-storage.js";
import { type SteppableClock, steppableClock } from "./steppable-clock.js";

// The faults used as a connector author would: around a real Job, with an in-memory external system.

const RECORDS = 3_000;
const numbers = () =>
  new GeneratorSource({ count: RECORDS, generate: (index) => index, recordsPerSecond: 6_000 });

async function until(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function expectExactlyOnce(output: CollectedOutput<number>): void {
  const committed = [...output.committed].sort((a, b) => a - b);
  expect(committed.length, "committed records").toBe(RECORDS);
  expect(new Set(committed).size, "distinct committed records").toBe(RECORDS);
  expect(output.pending).toEqual([]);
}

let clock: SteppableClock | undefined;
afterEach(() => {
  clock?.restore();
  clock = undefined;
});

describe("faults around a Job", () => {
  it("a checkpoint store that lands after its timeout is refused and never restorable", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory, {
      holdStores: (attempt) => attempt.metadata.checkpointId === 2,
    });
    const output = new CollectedOutput<number>();
    const job = new Job({
      jobId: "late-store",
      checkpointing: { interval: 20, timeout: 150, tolerableFailures: 5, storage },
      restartStrategy: { type: "none" },
    });
    job.fromSource(numbers(), { uid: "in" }).sinkTo(output.sinkFactory(), { uid: "out" });
    const running = job.execute();

    const held = await storage.nextHeldStore();
    // The job gave up on checkpoint 2 and carried on: a later checkpoint was stored.
    await until(
      () => storage.stores.some((r) => r.status === "stored" && r.attempt.metadata.checkpointId > 2),
      "a checkpoint after the timed-out one",
    );
    const outcome = await held.release();
    await running;

    expect(outcome.status, "the late store of checkpoint 2").toBe("failed");
    const error = outcome.status === "failed" ? outcome.error : undefined;
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("SUPERSEDED");
    expect((await memory.list("late-store")).map((m) => m.checkpointId)).not.toContain(2);
    expectExactlyOnce(output);
  });

  it("a job survives a failing store and a slow one", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory, {
      failStoresWhen: (attempt) => attempt.metadata.checkpointId === 2,
      latency: (attempt) => (attempt.metadata.checkpointId === 3 ? 60 : 0),
    });
    const output = new CollectedOutput<number>();
    const job = new Job({
      jobId: "failing-store",
      checkpointing: { interval: 20, timeout: 5_000, tolerableFailures: 5, storage },
      restartStrategy: { type: "none" },
    });
    job.fromSource(numbers(), { uid: "in" }).sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    expect(storage.stores.find((r) => r.attempt.metadata.checkpointId === 2)?.status).toBe(
      "injected-failure",
    );
    expect((await memory.list("failing-store")).map((m) => m.checkpointId)).not.toContain(2);
    expectExactlyOnce(output);
  });

  it("after the wall clock stepped back between runs, a run restores the latest checkpoint by id", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<number>();
    const build = (): Job => {
      const job = new Job({
        jobId: "clock-step",
        checkpointing: { interval: 20, storage, retained: 10 },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(new GeneratorSource({ count: RECORDS, generate: (i) => i, recordsPerSecond: 3_000 }), {
          uid: "in",
        })
        .sinkTo(output.sinkFactory(), { uid: "out" });
      return job;
    };
    // Run 1, stopped part way; then NTP steps the clock an hour back and run 2 goes further.
    const first = build();
    const firstRun = first.execute();
    await until(() => output.committed.length > 300, "run 1 to commit");
    first.stop();
    await firstRun;
    clock = steppableClock();
    clock.step(-3_600_000);
    const second = build();
    const secondRun = second.execute();
    const mark = output.committed.length;
    await until(() => output.committed.length > mark + 300, "run 2 to commit");
    second.stop();
    const secondResult = await secondRun;
    // The clock is right again: run 2's checkpoints now look an hour older than run 1's.
    clock.setOffset(0);
    const thirdResult = await build().execute();

    expect(thirdResult.restoredCheckpointId).toBe(secondResult.lastCheckpointId);
    expectExactlyOnce(output);
  });
});
