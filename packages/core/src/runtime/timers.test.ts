import { describe, expect, it, vi } from "vitest";
import type {
  Collector,
  KeyedProcessContext,
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
} from "../api/process-function.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { ValueState } from "../state/state.js";
import { Job } from "./job.js";

/** What the jobs did so far (output is only visible once committed): the test stops them on it. */
const seen = { registered: 0, fired: 0 };

/** Registers one processing-time timer per key, 1.5 s after its first record; emits when it fires. */
class RemindOnce implements KeyedProcessFunction<string, string, string> {
  private registered!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.registered = context.getState<number>({ name: "timer-at" });
  }
  processElement(_value: string, context: KeyedProcessContext<string>, out: Collector<string>): void {
    if (this.registered.value() !== undefined) return;
    const at = context.timerService().currentProcessingTime() + 1500;
    this.registered.update(at);
    context.timerService().registerProcessingTimeTimer(at);
    out.collect(`registered:${context.getCurrentKey()}`);
    seen.registered++;
  }
  onTimer(time: number, context: OnTimerContext<string>, out: Collector<string>): void {
    expect(context.timeDomain()).toBe("processing-time");
    expect(time).toBe(this.registered.value());
    out.collect(`fired:${context.getCurrentKey()}`);
    seen.fired++;
  }
}

function timerJob(storage: MemoryCheckpointStorage, output: CollectedOutput<string>): Job {
  const job = new Job({
    jobId: "timers",
    checkpointing: { interval: 1000, storage },
    restartStrategy: { type: "none" },
  });
  job
    .fromSource(
      new GeneratorSource({ splits: 2, generate: (index) => `k${index % 4}`, recordsPerSecond: 200 }),
      { uid: "in" },
    )
    .keyBy((key) => key)
    .process(() => new RemindOnce(), { uid: "remind" })
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

describe("timers", () => {
  it("keeps processing-time timers in the checkpoint and fires them after a restore", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<string>();
    const first = timerJob(storage, output);
    const firstRun = first.execute();
    // Stopped once every key registered its timer, well before any is due.
    await vi.waitFor(() => expect(seen.registered).toBe(4), { timeout: 10_000 });
    first.stop();
    await firstRun;
    expect(output.committed.filter((line) => line.startsWith("registered:")).sort()).toEqual([
      "registered:k0",
      "registered:k1",
      "registered:k2",
      "registered:k3",
    ]);
    expect(output.committed.some((line) => line.startsWith("fired:"))).toBe(false);

    // The restored job never registers again (its state says so): whatever fires comes from the checkpoint.
    const second = timerJob(storage, output);
    const secondRun = second.execute();
    await vi.waitFor(() => expect(seen.fired).toBe(4), { timeout: 10_000 });
    second.stop();
    await secondRun;
    expect(output.committed.filter((line) => line.startsWith("fired:")).sort()).toEqual([
      "fired:k0",
      "fired:k1",
      "fired:k2",
      "fired:k3",
    ]);
    expect(output.committed.filter((line) => line.startsWith("registered:"))).toHaveLength(4);
  });
});
