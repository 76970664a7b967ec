import { describe, expect, it, vi } from "vitest";
import type {
  CheckpointedFunction,
  CheckpointListener,
  FunctionInitializationContext,
  FunctionSnapshotContext,
} from "../api/checkpointed-function.js";
import type {
  Collector,
  KeyedProcessContext,
  KeyedProcessFunction,
  KeyedRuntimeContext,
} from "../api/process-function.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import type { Sink } from "../sink/sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { ListState, ValueState } from "../state/state.js";
import { Job } from "./job.js";

class RunningCount implements KeyedProcessFunction<string, { key: string }, [string, number]> {
  private count!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(
    _value: { key: string },
    context: KeyedProcessContext<string>,
    out: Collector<[string, number]>,
  ): void {
    const next = (this.count.value() ?? 0) + 1;
    this.count.update(next);
    out.collect([context.getCurrentKey(), next]);
  }
}

/**
 * Buffers records and publishes them at checkpoint complete. Publishing is idempotent per
 * (subtask, checkpoint) — as a real commit must be — so output is exactly-once across restarts.
 */
class BufferingSink<T> implements Sink<T>, CheckpointedFunction, CheckpointListener {
  private buffer: T[] = [];
  private pending = new Map<number, T[]>();
  private state!: ListState<[number, T[]]>;
  private subtask = 0;
  constructor(
    private readonly published: T[],
    private readonly committed = new Set<string>(),
  ) {}
  initializeState(context: FunctionInitializationContext): void {
    this.subtask = context.subtaskIndex;
    this.state = context.getOperatorStateStore().getListState({ name: "pending" });
    for (const [checkpointId, records] of this.state.get()) this.pending.set(checkpointId, records);
    this.commitUpTo(Number.POSITIVE_INFINITY);
  }
  write(value: T): void {
    this.buffer.push(value);
  }
  snapshotState(context: { checkpointId: number }): void {
    this.pending.set(context.checkpointId, this.buffer);
    this.buffer = [];
    this.state.update([...this.pending.entries()]);
  }
  notifyCheckpointComplete(checkpointId: number): void {
    this.commitUpTo(checkpointId);
  }
  private commitUpTo(checkpointId: number): void {
    for (const [id, records] of [...this.pending.entries()].sort((a, b) => a[0] - b[0])) {
      if (id > checkpointId) continue;
      const transaction = `${this.subtask}-${id}`;
      if (!this.committed.has(transaction)) this.published.push(...records);
      this.committed.add(transaction);
      this.pending.delete(id);
    }
  }
}

describe("Job", () => {
  it("runs generator → map → keyBy count → sink and commits at the end", async () => {
    const published: Array<[string, number]> = [];
    const job = new Job({
      jobId: "count",
      checkpointing: { interval: 20, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(
        new GeneratorSource({ count: 10_000, splits: 4, generate: (index) => ({ key: `k${index % 10}` }) }),
        { uid: "in" },
      )
      .map((value) => value)
      .keyBy((value) => value.key)
      .process(new RunningCount(), { uid: "count" })
      .sinkTo(new BufferingSink(published), { uid: "out" });
    const result = await job.execute();
    expect(result.endedBy).toBe("end-of-input");
    expect(published).toHaveLength(10_000);
    const finalCounts = new Map<string, number>();
    for (const [key, count] of published) finalCounts.set(key, Math.max(finalCounts.get(key) ?? 0, count));
    // State is per split and key: 4 splits × 10 keys... each key appears in every split.
    expect([...finalCounts.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10_000);
  });

  it("recovers after a failure from the last checkpoint with exactly-once output", async () => {
    const published: number[] = [];
    const committed = new Set<string>();
    const storage = new MemoryCheckpointStorage();
    let thrown = false;
    const job = new Job({
      jobId: "recover",
      parallelism: 2,
      checkpointing: { interval: 10, storage },
      restartStrategy: { type: "fixed-delay", attempts: 2, delay: 10 },
    });
    job
      .fromSource(
        new GeneratorSource({
          count: 50_000,
          splits: 3,
          generate: (index) => index,
          recordsPerSecond: 200_000,
        }),
        { uid: "in" },
      )
      .map((value) => {
        if (value === 30_000 && !thrown) {
          thrown = true;
          throw new Error("injected failure");
        }
        return value;
      })
      .sinkTo(() => new BufferingSink(published, committed), { uid: "out" });
    const result = await job.execute();
    expect(thrown).toBe(true);
    expect(result.restarts).toBe(1);
    expect(published).toHaveLength(50_000);
    expect(new Set(published).size).toBe(50_000);
  });
});

describe("Job final checkpoint", () => {
  /** Remembers whether each snapshot it took was the final one. */
  class FinalFlagSink implements Sink<number>, CheckpointedFunction {
    readonly flags: Array<boolean | undefined> = [];
    initializeState(context: FunctionInitializationContext): void {
      context.getOperatorStateStore().getListState({ name: "nothing" });
    }
    write(): void {}
    snapshotState(context: FunctionSnapshotContext): void {
      this.flags.push(context.isFinal);
    }
  }

  for (const ending of ["end-of-input", "stop"] as const) {
    it(`marks only the last snapshot as final (${ending})`, async () => {
      const sink = new FinalFlagSink();
      const job = new Job({
        jobId: `final-${ending}`,
        checkpointing: { interval: 20, storage: "memory" },
        restartStrategy: { type: "none" },
      });
      // About a second of input either way, so periodic checkpoints come before the final one.
      const source =
        ending === "stop"
          ? new GeneratorSource({ generate: (index) => index, recordsPerSecond: 2000 })
          : new GeneratorSource({ count: 2000, generate: (index) => index, recordsPerSecond: 2000 });
      job.fromSource(source, { uid: "in" }).sinkTo(sink, { uid: "out" });
      const running = job.execute();
      if (ending === "stop") {
        await vi.waitFor(() => expect(sink.flags.length).toBeGreaterThanOrEqual(2), { timeout: 10_000 });
        job.stop();
      }
      const result = await running;
      expect(result.endedBy).toBe(ending === "stop" ? "stop" : "end-of-input");
      expect(sink.flags.length).toBeGreaterThan(1);
      expect(sink.flags.at(-1)).toBe(true);
      expect(sink.flags.slice(0, -1).every((flag) => flag === false)).toBe(true);
    });
  }
});
