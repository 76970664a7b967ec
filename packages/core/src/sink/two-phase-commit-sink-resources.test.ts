import { describe, expect, it } from "vitest";
import type { FunctionSnapshotContext, RuntimeContext } from "../api/checkpointed-function.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { Job } from "../runtime/job.js";
import { GeneratorSource } from "../source/generator-source.js";
import { SinkTestHarness } from "./testing/sink-test-harness.js";
import { TwoPhaseCommitSink } from "./two-phase-commit-sink.js";

// The resource hooks: openResources first and closeResources last in every attempt, exactly once,
// whichever way the attempt ends (success, a failing step, a failing recovery, a restart).

interface Txn {
  readonly id: number;
  readonly values: number[];
}

/** What the fake "external system" holds across sink instances. */
class World {
  readonly log: string[] = [];
  readonly committed: number[] = [];
  readonly staged = new Map<number, number[]>();
  nextId = 1;
  /** Calls to fail once, by name (e.g. "preCommit@2" = the pre-commit of checkpoint 2). */
  readonly failOnce = new Set<string>();

  shouldFail(what: string): boolean {
    return this.failOnce.delete(what);
  }
}

/** Logs its steps as `<instance>:<step>`; throws where the world says; needs its "connection" open. */
class ResourceSink extends TwoPhaseCommitSink<number, Txn> {
  private static instances = 0;
  readonly instance = ++ResourceSink.instances;
  private connection: { open: boolean } | undefined;
  opens = 0;
  closes = 0;

  constructor(private readonly world: World) {
    super({ commitRetry: { maxAttempts: 1, initialDelay: 0 } });
  }

  private step(name: string): void {
    this.world.log.push(`${this.instance}:${name}`);
    if (name !== "openResources" && name !== "closeResources" && this.connection?.open !== true) {
      throw new Error(`${name} without an open connection`);
    }
  }

  protected override openResources(context: RuntimeContext): void {
    this.opens++;
    this.connection = { open: true };
    this.step("openResources");
    if (this.world.shouldFail(`openResources@${context.attemptNumber}`)) throw new Error("cannot connect");
  }

  protected override closeResources(): void {
    this.closes++;
    this.step("closeResources");
    if (this.connection !== undefined) this.connection.open = false;
    if (this.world.shouldFail("closeResources")) throw new Error("disconnect failed");
  }

  protected beginTransaction(): Txn {
    this.step("begin");
    return { id: this.world.nextId++, values: [] };
  }

  protected invoke(txn: Txn, value: number): void {
    txn.values.push(value);
  }

  protected preCommit(txn: Txn, checkpoint: FunctionSnapshotContext): void {
    this.step(`preCommit@${checkpoint.checkpointId}`);
    if (this.world.shouldFail(`preCommit@${checkpoint.checkpointId}`)) throw new Error("preCommit failed");
    this.world.staged.set(txn.id, [...txn.values]);
  }

  protected commit(txn: Txn): void {
    this.step("commit");
    const staged = this.world.staged.get(txn.id);
    if (staged === undefined) return;
    this.world.committed.push(...staged);
    this.world.staged.delete(txn.id);
  }

  protected override recoverAndCommit(txn: Txn): void {
    this.step("recoverAndCommit");
    if (this.world.shouldFail("recoverAndCommit")) throw new Error("recovery failed");
    this.commit(txn);
  }

  protected abort(txn: Txn): void {
    this.step("abort");
    if (this.world.shouldFail("abort")) throw new Error("abort failed");
    this.world.staged.delete(txn.id);
  }

  protected override finishRecoveringTransactions(): void {
    this.step("finishRecovering");
  }
}

/** The log lines of one instance, without the instance prefix. */
function stepsOf(world: World, sink: ResourceSink): string[] {
  const prefix = `${sink.instance}:`;
  return world.log.filter((line) => line.startsWith(prefix)).map((line) => line.slice(prefix.length));
}

describe("TwoPhaseCommitSink resource hooks (openResources / closeResources)", () => {
  it("opens first, before recovery, and closes last, after the abort of the open transaction", async () => {
    const world = new World();
    const first = new ResourceSink(world);
    const harness = new SinkTestHarness(first);
    await harness.initialize();
    await harness.write(1, 2);
    const checkpoint = await harness.snapshot(1);
    await harness.write(3);
    await harness.close();
    expect(stepsOf(world, first)).toEqual([
      "openResources",
      "finishRecovering",
      "begin",
      "preCommit@1",
      "begin",
      "abort",
      "closeResources",
    ]);

    // Restored: the connection is open before recoverAndCommit needs it.
    const second = new ResourceSink(world);
    const restored = new SinkTestHarness(second);
    await restored.initialize(checkpoint);
    await restored.finishAndClose(2);
    expect(stepsOf(world, second)).toEqual([
      "openResources",
      "recoverAndCommit",
      "commit",
      "abort",
      "finishRecovering",
      "begin",
      "preCommit@2",
      "begin",
      "commit",
      "abort",
      "closeResources",
    ]);
    expect(world.committed).toEqual([1, 2]);
    expect([second.opens, second.closes]).toEqual([1, 1]);
  });

  it("closes once after a failing preCommit (the attempt fails, close aborts), and a second close does nothing", async () => {
    const world = new World();
    world.failOnce.add("preCommit@1");
    const sink = new ResourceSink(world);
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.write(1);
    await expect(harness.snapshot(1)).rejects.toThrow("preCommit failed");
    await harness.close();
    await harness.close();
    expect(stepsOf(world, sink).slice(-3)).toEqual(["preCommit@1", "abort", "closeResources"]);
    expect([sink.opens, sink.closes]).toEqual([1, 1]);
  });

  it("closes even when the abort in close() throws, and close() rejects with a failing closeResources", async () => {
    const world = new World();
    world.failOnce.add("abort");
    const sink = new ResourceSink(world);
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.close();
    expect(stepsOf(world, sink).slice(-2)).toEqual(["abort", "closeResources"]);

    const failing = new ResourceSink(world);
    world.failOnce.add("closeResources");
    const other = new SinkTestHarness(failing);
    await other.initialize();
    await expect(other.close()).rejects.toThrow("disconnect failed");
    await other.close();
    expect([failing.opens, failing.closes]).toEqual([1, 1]);
  });

  it("closes once when initializeState fails (in recovery or in openResources itself); a later close() does not close again", async () => {
    const world = new World();
    const writer = new SinkTestHarness(new ResourceSink(world));
    await writer.initialize();
    await writer.write(7);
    const checkpoint = await writer.snapshot(1);

    world.failOnce.add("recoverAndCommit");
    const recovering = new ResourceSink(world);
    const harness = new SinkTestHarness(recovering);
    await expect(harness.initialize(checkpoint)).rejects.toThrow("recovery failed");
    expect(stepsOf(world, recovering)).toEqual(["openResources", "recoverAndCommit", "closeResources"]);
    await harness.close();
    expect([recovering.opens, recovering.closes]).toEqual([1, 1]);

    world.failOnce.add("openResources@0");
    const unreachable = new ResourceSink(world);
    await expect(new SinkTestHarness(unreachable).initialize()).rejects.toThrow("cannot connect");
    expect(stepsOf(world, unreachable)).toEqual(["openResources", "closeResources"]);
  });

  it("a reused instance that was not closed closes the earlier attempt's resources before opening new ones", async () => {
    const world = new World();
    const sink = new ResourceSink(world);
    await new SinkTestHarness(sink, { attemptNumber: 0 }).initialize();
    const next = new SinkTestHarness(sink, { attemptNumber: 1 });
    await next.initialize();
    await next.close();
    expect(stepsOf(world, sink)).toEqual([
      "openResources",
      "finishRecovering",
      "begin",
      "closeResources",
      "openResources",
      "finishRecovering",
      "begin",
      "abort",
      "closeResources",
    ]);
    expect([sink.opens, sink.closes]).toEqual([2, 2]);
  });

  describe("in a job", () => {
    function jobWith(world: World, sinks: ResourceSink[], source = numbers()): Job {
      const job = new Job({
        jobId: "resources",
        checkpointing: { interval: 20, storage: new MemoryCheckpointStorage() },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 1 },
      });
      job.fromSource(source, { uid: "numbers" }).sinkTo(
        () => {
          const sink = new ResourceSink(world);
          sinks.push(sink);
          return sink;
        },
        { uid: "out" },
      );
      return job;
    }

    function numbers(): GeneratorSource<number> {
      return new GeneratorSource<number>({ count: 400, generate: (index) => index, recordsPerSecond: 4_000 });
    }

    it("opens and closes exactly once per attempt across a restart after a failing preCommit", async () => {
      const world = new World();
      world.failOnce.add("preCommit@2");
      const sinks: ResourceSink[] = [];
      const result = await jobWith(world, sinks).execute();
      expect(result.restarts).toBe(1);
      expect(sinks.length).toBe(2);
      for (const sink of sinks) {
        expect([sink.opens, sink.closes]).toEqual([1, 1]);
        const steps = stepsOf(world, sink);
        expect(steps[0]).toBe("openResources");
        expect(steps.at(-1)).toBe("closeResources");
      }
      // The protocol is unchanged: every record once.
      expect([...world.committed].sort((a, b) => a - b)).toEqual(Array.from({ length: 400 }, (_, i) => i));
    });

    it("closes the sink of an attempt whose subtask failed to start after the sink was initialized", async () => {
      const world = new World();
      const sinks: ResourceSink[] = [];
      const source = numbers();
      let discoveries = 0;
      // The source's open (after every operator's initializeState) fails in the first attempt.
      const flaky = Object.assign(Object.create(source) as GeneratorSource<number>, {
        discoverSplits: (context: never) => {
          discoveries++;
          if (discoveries === 1) return Promise.reject(new Error("split discovery failed"));
          return source.discoverSplits(context);
        },
      });
      const result = await jobWith(world, sinks, flaky).execute();
      expect(result.restarts).toBe(1);
      expect(sinks.map((sink) => [sink.opens, sink.closes])).toEqual([
        [1, 1],
        [1, 1],
      ]);
      expect(stepsOf(world, sinks[0] as ResourceSink)).toEqual([
        "openResources",
        "finishRecovering",
        "begin",
        "abort",
        "closeResources",
      ]);
    });
  });
});
