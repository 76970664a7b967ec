import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { Collector, KeyedProcessContext, KeyedRuntimeContext } from "../api/process-function.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { isOnceflowError } from "../errors/onceflow-error.js";
import { silentLogger } from "../observability/logger.js";
import { noopMetrics } from "../observability/metrics.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { FileLinesSource } from "../source/file-lines-source.js";
import { GeneratorSource } from "../source/generator-source.js";
import { defaultSerializer } from "../state/serializer.js";
import type { ValueState } from "../state/state.js";
import { countAggregate } from "../window/aggregate-function.js";
import { TumblingEventTimeWindows } from "../window/window-assigners.js";
import { Job } from "./job.js";
import { type KeyedPartitioning, KeyedProcessOperator } from "./operators/keyed-process-operator.js";
import type { OperatorSnapshot } from "./operators/stream-operator.js";
import { type Counted, type Reading, RunningCount } from "./testing/running-count.js";

/**
 * A running count that waits for the event loop now and then, as a function calling a service
 * would: other subtasks' loops (and their checkpoint mail) run while a batch is half processed.
 */
class SlowRunningCount extends RunningCount {
  private calls = 0;
  private attemptNumber = 0;
  override open(context: KeyedRuntimeContext): void {
    super.open(context);
    this.attemptNumber = context.attemptNumber;
  }
  override processElement(
    reading: Reading,
    context: KeyedProcessContext<string>,
    out: Collector<Counted>,
  ): void | Promise<void> {
    // The first four attempts fail, each after checkpoints were taken while records were on their way.
    if (this.attemptNumber < 4 && this.calls === 2_000) throw new Error("injected failure");
    super.processElement(reading, context, out);
    if (++this.calls % 4 === 0) return new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The running count of each key: emits (current key, count so far) per record. */
class CountPerKey {
  private count!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(_value: string, context: KeyedProcessContext<string>, out: Collector<string>): void {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect(`${context.getCurrentKey()}=${count}`);
  }
}

async function twoFilesWithKeyAThreeTimes(): Promise<string[]> {
  const directory = await mkdtemp(join(tmpdir(), "keyed-exchange-"));
  const paths = [join(directory, "one.txt"), join(directory, "two.txt")];
  for (const path of paths) await writeFile(path, "a\na\na\n");
  return paths;
}

const byCount = (values: readonly string[]): string[] =>
  [...values].sort((left, right) => Number(left.split("=")[1]) - Number(right.split("=")[1]));

describe("keyBy: one state per key for the whole job", () => {
  it.each([1, 2, 3])(
    "two files holding key 'a' three times each count to 6 at parallelism %i",
    async (parallelism) => {
      const paths = await twoFilesWithKeyAThreeTimes();
      const output = new CollectedOutput<string>();
      const job = new Job({
        jobId: `two-files-${parallelism}`,
        parallelism,
        checkpointing: { interval: 1000, storage: "memory" },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(new FileLinesSource({ paths }), { uid: "lines" })
        .keyBy((line) => line)
        .process(() => new CountPerKey(), { uid: "count" })
        .sinkTo(output.sinkFactory(), { uid: "out" });
      await job.execute();
      expect(byCount(output.committed)).toEqual(["a=1", "a=2", "a=3", "a=4", "a=5", "a=6"]);
    },
  );

  it("a union of two sources in one subtask counts to 6", async () => {
    const [first, second] = await twoFilesWithKeyAThreeTimes();
    const output = new CollectedOutput<string>();
    const job = new Job({
      jobId: "union",
      checkpointing: { interval: 1000, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    const left = job.fromSource(new FileLinesSource({ paths: [first!] }), { uid: "left" });
    const right = job.fromSource(new FileLinesSource({ paths: [second!] }), { uid: "right" });
    left
      .union(right)
      .keyBy((line) => line)
      .process(new CountPerKey(), { uid: "count" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    expect(byCount(output.committed)).toEqual(["a=1", "a=2", "a=3", "a=4", "a=5", "a=6"]);
  });

  it.each([
    [2, 4],
    [2, 3],
    [3, 5],
  ])(
    "the README's windowed job gives one row per (user, window) at parallelism %i with %i splits",
    async (parallelism, splits) => {
      const output = new CollectedOutput<{ user: string; start: number; count: number }>();
      const job = new Job({
        jobId: `clicks-${parallelism}-${splits}`,
        parallelism,
        checkpointing: { interval: 50, storage: "memory" },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(
          new GeneratorSource({ count: 20_000, splits, generate: (i) => ({ user: `u${i % 100}`, at: i }) }),
          { uid: "clicks", watermarks: { timestampAssigner: (click) => click.at, maxOutOfOrderness: 100 } },
        )
        .keyBy((click) => click.user)
        .window(TumblingEventTimeWindows.of(10_000))
        .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), {
          uid: "count",
        })
        .sinkTo(output.sinkFactory(), { uid: "files" });
      await job.execute();
      const rows = output.committed;
      expect(rows).toHaveLength(200); // 100 users × 2 windows
      expect(new Set(rows.map((row) => `${row.user}@${row.start}`)).size).toBe(200);
      expect(rows.every((row) => row.count === 100)).toBe(true);
    },
  );

  it("a checkpoint taken across the exchange restores at another parallelism to the same counts", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<string>();
    const build = (parallelism: number, count: number): Job => {
      const job = new Job({
        jobId: "exchange-rescale",
        parallelism,
        checkpointing: { interval: 1000, storage },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(new GeneratorSource({ count, splits: 5, generate: (i) => `k${i % 7}` }), { uid: "keys" })
        .keyBy((key) => key)
        .process(() => new CountPerKey(), { uid: "count" })
        .sinkTo(output.sinkFactory(), { uid: "out" });
      return job;
    };
    // A bounded first run ends with a final checkpoint; the second reads on from it (the generator
    // goes on from its restored positions up to the larger count).
    await build(2, 700).execute();
    await build(3, 1400).execute();
    const highest = new Map<string, number>();
    for (const entry of output.committed) {
      const [key, count] = entry.split("=") as [string, string];
      highest.set(key, Math.max(highest.get(key) ?? 0, Number(count)));
    }
    expect(Object.fromEntries(highest)).toEqual(
      Object.fromEntries(Array.from({ length: 7 }, (_, key) => [`k${key}`, 200])),
    );
    expect(new Set(output.committed).size).toBe(1400);
  });
});

describe("keyBy refuses what it would get wrong", () => {
  const build = (options: { parallelism: number; subtaskIndex?: number; maxParallelism?: number }) => {
    const job = new Job({
      jobId: "refusals",
      ...options,
      checkpointing: { interval: 1000, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(new GeneratorSource({ count: 10, generate: (i) => `k${i}` }), { uid: "keys" })
      .keyBy((key) => key)
      .process(() => new CountPerKey(), { uid: "count" })
      .sinkTo(new CollectedOutput<string>().sinkFactory(), { uid: "out" });
    return job;
  };

  it("a parallelism above maxParallelism is a configuration error", () => {
    expect(() => build({ parallelism: 4, maxParallelism: 2 })).toThrow(/above maxParallelism 2/);
  });

  it("one subtask per process with keyBy and no exchange fails at start, naming the exchange option and reinterpretAsKeyedStream", async () => {
    const error = await build({ parallelism: 2, subtaskIndex: 0 })
      .execute()
      .catch((caught: unknown) => caught);
    expect(isOnceflowError(error) && error.code).toBe("CONFIGURATION");
    expect(String(error)).toMatch(/exchange: kafkaRepartitionExchange\(\{ brokers \}\)/);
    expect(String(error)).toMatch(/reinterpretAsKeyedStream/);
  });
});

describe("an exchange between processes", () => {
  it("needs checkpointing: without it the job fails at start saying so", async () => {
    const job = new Job({
      jobId: "exchange-without-checkpoints",
      parallelism: 2,
      subtaskIndex: 0,
      restartStrategy: { type: "none" },
      exchange: {
        name: "test exchange",
        channel: () => {
          throw new Error("not reached: the job is refused before the exchange is set up");
        },
      },
    });
    job
      .fromSource(new GeneratorSource({ count: 10, generate: (i) => `k${i}` }), { uid: "keys" })
      .keyBy((key) => key)
      .process(() => new CountPerKey(), { uid: "count" })
      .sinkTo(new CollectedOutput<string>().sinkFactory(), { uid: "out" });
    const error = await job.execute().catch((caught: unknown) => caught);
    expect(isOnceflowError(error) && error.code).toBe("CONFIGURATION");
    expect(String(error)).toMatch(/turn checkpointing on/);
  });
});

describe("checkpoints across the exchange", () => {
  it("a restart from checkpoints taken while batches cross the exchange keeps every key's count exact", async () => {
    const records = 30_000;
    const keys = 13;
    const output = new CollectedOutput<Counted>();
    const job = new Job({
      jobId: "aligned",
      parallelism: 3,
      checkpointing: { interval: 10, storage: new MemoryCheckpointStorage() },
      restartStrategy: { type: "fixed-delay", attempts: 5, delay: 1 },
    });
    job
      .fromSource(
        new GeneratorSource<Reading>({
          count: records,
          splits: 7,
          generate: (index) => ({ index, key: `key-${index % keys}` }),
          recordsPerSecond: 60_000,
        }),
        { uid: "readings" },
      )
      .keyBy((reading) => reading.key)
      .process(() => new SlowRunningCount(), { uid: "count" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    const result = await job.execute();
    expect(result.restarts).toBe(4);
    const committed = output.committed;
    expect(new Set(committed.map((record) => record.index)).size).toBe(records);
    expect(committed).toHaveLength(records);
    const countsByKey = new Map<string, number[]>();
    for (const record of committed)
      countsByKey.set(record.key, [...(countsByKey.get(record.key) ?? []), record.count]);
    for (const [key, counts] of countsByKey) {
      const expected = Array.from(
        { length: records / keys + (Number(key.slice(4)) < records % keys ? 1 : 0) },
        (_, index) => index + 1,
      );
      expect(
        [...counts].sort((a, b) => a - b),
        key,
      ).toEqual(expected);
    }
  });
});

describe("the checkpoint records how keyed state was partitioned", () => {
  const build = (
    storage: MemoryCheckpointStorage,
    options: { maxParallelism?: number; reinterpret?: boolean },
  ): Job => {
    const job = new Job({
      jobId: "modes",
      parallelism: 2,
      ...(options.maxParallelism === undefined ? {} : { maxParallelism: options.maxParallelism }),
      checkpointing: { interval: 1000, storage },
      restartStrategy: { type: "fixed-delay", attempts: 3, delay: 1 },
    });
    const keys = job.fromSource(new GeneratorSource({ count: 40, splits: 2, generate: (i) => `k${i % 4}` }), {
      uid: "keys",
    });
    const keyed = options.reinterpret
      ? keys.reinterpretAsKeyedStream((key) => key)
      : keys.keyBy((key) => key);
    keyed
      .process(() => new CountPerKey(), { uid: "count" })
      .sinkTo(new CollectedOutput<string>().sinkFactory(), {
        uid: "out",
      });
    return job;
  };
  const failureOf = (job: Job): Promise<unknown> =>
    job.execute().then(
      () => undefined,
      (error: unknown) => error,
    );

  it("restoring with another maxParallelism is refused at once, naming the one to keep", async () => {
    const storage = new MemoryCheckpointStorage();
    await build(storage, { maxParallelism: 64 }).execute();
    const error = await failureOf(build(storage, { maxParallelism: 256 }));
    expect(isOnceflowError(error) && error.code).toBe("CONFIGURATION");
    expect(String(error)).toMatch(/maxParallelism: is 256, .* in 64 key groups; .* set it back to 64/);
  });

  it("state written after keyBy is refused after reinterpretAsKeyedStream, and the reverse", async () => {
    const byKeyGroup = new MemoryCheckpointStorage();
    await build(byKeyGroup, {}).execute();
    expect(String(await failureOf(build(byKeyGroup, { reinterpret: true })))).toMatch(
      /keyed state of 'count': .* per key group .* now runs after reinterpretAsKeyedStream/,
    );
    const bySplit = new MemoryCheckpointStorage();
    await build(bySplit, { reinterpret: true }).execute();
    const error = await failureOf(build(bySplit, {}));
    expect(isOnceflowError(error) && error.code).toBe("CONFIGURATION");
    expect(String(error)).toMatch(/keyed state of 'count': .* per source split .* now runs after keyBy/);
  });

  it("keyed state written per split before key groups is refused by keyBy and read by reinterpretAsKeyedStream", async () => {
    // A snapshot as checkpoints held it before key groups: scoped by split key, with no mode.
    const legacy: OperatorSnapshot = {
      keyed: { "keys/split-0": { count: defaultSerializer.serialize(new Map([["k0", 3]])) } },
    };
    const environment = {
      jobId: "legacy",
      subtaskIndex: 0,
      parallelism: 1,
      attemptNumber: 0,
      incarnation: 1,
      logger: silentLogger,
      metrics: noopMetrics,
      restoredCheckpointId: 7,
      checkpointingInterval: 1000,
    };
    const operatorOf = (partitioning: KeyedPartitioning) =>
      new KeyedProcessOperator("count", (key) => key, new CountPerKey() as never, partitioning);
    await expect(
      operatorOf({ kind: "key-group", maxParallelism: 128 }).initialize(environment, legacy),
    ).rejects.toThrow(
      /checkpoint 7 holds it per source split, as written before keyed state was kept per key group; .*reinterpretAsKeyedStream/,
    );
    await expect(operatorOf({ kind: "split" }).initialize(environment, legacy)).resolves.toBeUndefined();
  });
});

describe("skew", () => {
  it("one key with 90 % of the records is counted exactly across the exchange", async () => {
    const records = 20_000;
    const output = new CollectedOutput<Counted>();
    const job = new Job({
      jobId: "skew",
      parallelism: 3,
      checkpointing: { interval: 10, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(
        new GeneratorSource<Reading>({
          count: records,
          splits: 6,
          generate: (index) => ({ index, key: index % 10 === 0 ? `cold-${index % 7}` : "hot" }),
        }),
        { uid: "readings" },
      )
      .keyBy((reading) => reading.key)
      .process(() => new RunningCount(), { uid: "count" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    const hot = output.committed.filter((record) => record.key === "hot").map((record) => record.count);
    expect(hot.sort((a, b) => a - b)).toEqual(Array.from({ length: 18_000 }, (_, index) => index + 1));
    expect(output.committed).toHaveLength(records);
  });
});

describe("several exchanges", () => {
  it("keyBy → count → keyBy again → count: both stages count per key for the whole job", async () => {
    const output = new CollectedOutput<string>();
    const job = new Job({
      jobId: "two-exchanges",
      parallelism: 3,
      checkpointing: { interval: 10, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(new GeneratorSource({ count: 3_000, splits: 4, generate: (i) => `k${i % 10}` }), {
        uid: "keys",
      })
      .keyBy((key) => key)
      .process(() => new CountPerKey(), { uid: "first" })
      // "k3=17" → its parity: the second stage counts how many running counts were odd or even.
      .keyBy((counted) => (Number(counted.split("=")[1]) % 2 === 0 ? "even" : "odd"))
      .process(() => new CountPerKey(), { uid: "second" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    // Each of the 10 keys counts 1..300: 150 odd and 150 even counts per key.
    const highest = (prefix: string) =>
      Math.max(
        ...output.committed
          .filter((entry) => entry.startsWith(prefix))
          .map((entry) => Number(entry.split("=")[1])),
      );
    expect(highest("odd=")).toBe(1_500);
    expect(highest("even=")).toBe(1_500);
    expect(output.committed).toHaveLength(3_000);
  });

  it("a union of a keyed stage's output and a stream before any exchange reaches the sink exactly once", async () => {
    const output = new CollectedOutput<string>();
    const job = new Job({
      jobId: "union-across-stages",
      parallelism: 2,
      checkpointing: { interval: 10, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    const keys = job.fromSource(
      new GeneratorSource({ count: 1_000, splits: 3, generate: (i) => `k${i % 5}` }),
      {
        uid: "keys",
      },
    );
    const counted = keys.keyBy((key) => key).process(() => new CountPerKey(), { uid: "count" });
    counted.union(keys.map((key) => `raw:${key}`)).sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    expect(output.committed.filter((entry) => entry.startsWith("raw:"))).toHaveLength(1_000);
    const counts = output.committed.filter((entry) => !entry.startsWith("raw:"));
    expect(counts).toHaveLength(1_000);
    expect(new Set(counts).size).toBe(1_000);
  });
});

describe("rescale of windows", () => {
  it("windows open at a stop at parallelism 2 fire once, complete, after a restore at parallelism 3", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<{ user: string; start: number; count: number }>();
    const build = (parallelism: number): Job => {
      const job = new Job({
        jobId: "windows-rescale",
        parallelism,
        checkpointing: { interval: 20, storage },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(
          new GeneratorSource({
            count: 12_000,
            splits: 5,
            generate: (i) => ({ user: `u${i % 30}`, at: i }),
            timestampOf: (i) => i,
            recordsPerSecond: 3_000,
          }),
          { uid: "clicks", watermarks: { timestampAssigner: (click) => click.at, maxOutOfOrderness: 50 } },
        )
        .keyBy((click) => click.user)
        .window(TumblingEventTimeWindows.of(3_000))
        .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), {
          uid: "count",
        })
        .sinkTo(output.sinkFactory(), { uid: "out" });
      return job;
    };
    const first = build(2);
    const running = first.execute();
    // Stopped once the first windows were committed: later windows are open, their timers pending.
    await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(0), { timeout: 10_000 });
    first.stop();
    await running;
    expect(output.committed.length).toBeLessThan(120);
    await build(3).execute();
    const rows = output.committed;
    expect(rows).toHaveLength(120); // 30 users × 4 windows, each once
    expect(new Set(rows.map((row) => `${row.user}@${row.start}`)).size).toBe(120);
    expect(rows.every((row) => row.count === 100)).toBe(true);
  });
});
