import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { filesystem } from "../checkpoint/filesystem-checkpoint-storage.js";
import { ConfigurationError, TransactionError } from "../errors/onceflow-error.js";
import { silentLogger } from "../observability/logger.js";
import { Job } from "../runtime/job.js";
import { GeneratorSource } from "../source/generator-source.js";
import { CollectedOutput, CollectSink } from "./collect-sink.js";
import { SinkTestHarness } from "./testing/sink-test-harness.js";

function harnessFor<T>(output: CollectedOutput<T>, subtaskIndex = 0, parallelism = 1) {
  const sink = output.sinkFactory()({ subtaskIndex, parallelism });
  return new SinkTestHarness<T>(sink, { subtaskIndex, parallelism });
}

describe("CollectSink", () => {
  it("makes values visible only when their checkpoint completes", async () => {
    const output = new CollectedOutput<string>();
    const harness = harnessFor(output);
    await harness.initialize();
    await harness.write("a", "b");
    expect(output.committed).toEqual([]);
    expect(output.pending).toEqual([]);
    await harness.snapshot(1);
    expect(output.pending).toEqual(["a", "b"]);
    expect(output.committed).toEqual([]);
    await harness.notifyComplete(1);
    expect(output.pending).toEqual([]);
    expect(output.committed).toEqual(["a", "b"]);
  });

  it("makes one sink per subtask, all sharing the output, committed in commit order", async () => {
    const output = new CollectedOutput<string>();
    const factory = output.sinkFactory({ name: "collected" });
    const first = factory({ subtaskIndex: 0, parallelism: 2 });
    const second = factory({ subtaskIndex: 1, parallelism: 2 });
    expect(first).not.toBe(second);
    expect(first).toBeInstanceOf(CollectSink);
    expect(first.name).toBe("collected");
    const harnesses = [new SinkTestHarness(first), new SinkTestHarness(second)];
    for (const harness of harnesses) await harness.initialize();
    await harnesses[0]?.write("from-0");
    await harnesses[1]?.write("from-1");
    for (const harness of harnesses) await harness.snapshot(1);
    await harnesses[1]?.notifyComplete(1);
    await harnesses[0]?.notifyComplete(1);
    expect(output.committed).toEqual(["from-1", "from-0"]);
  });

  it("gives every value exactly once across an in-process restart", async () => {
    const output = new CollectedOutput<number>();
    const harness = harnessFor(output);
    await harness.initialize();
    await harness.write(1, 2);
    await harness.checkpoint(1);
    await harness.write(3);
    const checkpoint = await harness.snapshot(2);
    await harness.write(4); // lost with the crash; the source replays it
    await harness.close();
    expect(output.pending).toEqual([3]);

    const restored = harnessFor(output);
    await restored.initialize(checkpoint);
    expect(output.committed).toEqual([1, 2, 3]);
    await restored.write(4);
    await restored.finishAndClose(3);
    expect(output.committed).toEqual([1, 2, 3, 4]);
    expect(output.pending).toEqual([]);
  });

  it("commits idempotently when a restore repeats a commit that already happened", async () => {
    const output = new CollectedOutput<string>();
    const harness = harnessFor(output);
    await harness.initialize();
    await harness.write("once");
    const checkpoint = await harness.checkpoint(1);
    await harnessFor(output).initialize(checkpoint);
    expect(output.committed).toEqual(["once"]);
  });

  it("discards the open transaction on close", async () => {
    const output = new CollectedOutput<string>();
    const harness = harnessFor(output);
    await harness.initialize();
    await harness.write("dropped");
    await harness.close();
    await harnessFor(output).initialize();
    expect(output.committed).toEqual([]);
    expect(output.pending).toEqual([]);
  });

  it("fails loudly, without retrying, when a restored transaction is unknown to the output", async () => {
    const original = new CollectedOutput<string>();
    const harness = harnessFor(original);
    await harness.initialize();
    await harness.write("x");
    const checkpoint = await harness.snapshot(1);
    const elsewhere = new CollectedOutput<string>();
    const failure = await harnessFor(elsewhere)
      .initialize(checkpoint)
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionError);
    expect(failure).toMatchObject({ code: "COMMIT_FAILED", checkpointId: 1 });
    expect((failure as Error).message).toMatch(/which this CollectedOutput never made/);
    // The cause is a configuration error: a job fails at once instead of restarting forever.
    expect((failure as Error).cause).toBeInstanceOf(ConfigurationError);
  });

  it("fails a job run twice on the same filesystem storage with a typed error, not restarts forever", async () => {
    const directory = await mkdtemp(join(tmpdir(), "onceflow-collect-rerun-"));
    try {
      const runOnce = (output: CollectedOutput<number>) => {
        // The default restart strategy: a failure that a restart cannot fix must not loop.
        const job = new Job({
          jobId: "collected-twice",
          logger: silentLogger,
          checkpointing: { interval: 100, storage: filesystem(directory) },
        });
        job
          .fromSource(new GeneratorSource({ count: 50, generate: (index) => index }), { uid: "numbers" })
          .sinkTo(output.sinkFactory(), { uid: "out" });
        return job.execute();
      };
      const first = new CollectedOutput<number>();
      await runOnce(first);
      expect(first.committed).toHaveLength(50);
      const failure = await runOnce(new CollectedOutput<number>()).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ConfigurationError);
      expect(failure).toMatchObject({ code: "CONFIGURATION", setting: "checkpointing.storage" });
      expect((failure as Error).message).toMatch(/Use storage: "memory" with it, or a new storage folder/);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });

  it("returns copies", async () => {
    const output = new CollectedOutput<string>();
    const harness = harnessFor(output);
    await harness.initialize();
    await harness.write("a");
    await harness.checkpoint(1);
    output.committed.push("sneaky");
    expect(output.committed).toEqual(["a"]);
  });
});
