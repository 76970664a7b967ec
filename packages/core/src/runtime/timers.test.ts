import { describe, expect, it } from "vitest";
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

/** Registers one processing-time timer per key, 400 ms after its first record; emits when it fires. */
class RemindOnce implements KeyedProcessFunction<string, string, string> {
  private registered!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.registered = context.getState<number>({ name: "timer-at" });
  }
  processElement(_value: string, context: KeyedProcessContext<string>, out: Collector<string>): void {
    if (this.registered.value() !== undefined) return;
    const at = context.timerService().currentProcessingTime() + 400;
    this.registered.update(at);
    context.timerService().registerProcessingTimeTimer(at);
    out.collect(`registered:${context.getCurrentKey()}`);
  }
  onTimer(time: number, context: OnTimerContext<string>, out: Collector<string>): void {
    expect(context.timeDomain()).toBe("processing-time");
    expect(time).toBe(this.registered.value());
    out.collect(`fired:${context.getCurrentKey()}`);
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
    setTimeout(() => first.stop(), 150); // before any timer is due
    await first.execute();
    expect(output.committed.filter((line) => line.startsWith("registered:")).sort()).toEqual([
      "registered:k0",
      "registered:k1",
      "registered:k2",
      "registered:k3",
    ]);
    expect(output.committed.some((line) => line.startsWith("fired:"))).toBe(false);

    // The restored job never registers again (its state says so): whatever fires comes from the checkpoint.
    const second = timerJob(storage, output);
    setTimeout(() => second.stop(), 900);
    await second.execute();
    expect(output.committed.filter((line) => line.startsWith("fired:")).sort()).toEqual([
      "fired:k0",
      "fired:k1",
      "fired:k2",
      "fired:k3",
    ]);
    expect(output.committed.filter((line) => line.startsWith("registered:"))).toHaveLength(4);
  });
});
