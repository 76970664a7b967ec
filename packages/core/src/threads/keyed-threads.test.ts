import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { readCommittedFiles } from "../sink/file-sink.js";

// The built package (`npm run build -w @onceflow/core`): the threads run dist/subtask-thread.js.
const dist = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;
const { runSubtasksInThreads } = (await import(dist)) as typeof import("../index.js");

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Settings {
  readonly jobId: string;
  readonly parallelism: number;
  readonly checkpoints: string;
  readonly output: string;
  /**
   * The windowed job's keyBy gets a serializer (`user,at` as text), whose `deserialize` writes this
   * file: records crossed the threads as its bytes.
   */
  readonly serializedMarker?: string;
  /** The thread of subtask 1 dies of an uncaught error once (this file marks that it did), then restarts. */
  readonly dieOnce?: string;
  /** `files`: lines of `paths` counted per line; `generator`: `count` records of `keys` keys. */
  readonly input:
    | { readonly kind: "files"; readonly paths: readonly string[] }
    | {
        readonly kind: "generator";
        readonly count: number;
        readonly keys: number;
        /** One key ("hot") gets 90 % of the records, each carrying this many bytes of padding. */
        readonly skewedPadding?: number;
        readonly recordsPerSecond?: number;
        /** Read on past \`count\` until stopped. */
        readonly unbounded?: boolean;
      }
    | { readonly kind: "windows"; readonly count: number; readonly keys: number }
    /** Unbounded, in one split: the other subtasks read nothing and are idle. */
    | { readonly kind: "windows-one-split"; readonly keys: number };
}

/** A job module: a running count per key (or a windowed count) behind keyBy, into a FileSink. */
function jobModule(settings: Settings): string {
  return `import { existsSync, writeFileSync } from "node:fs";
import { FileLinesSource, FileSink, GeneratorSource, Job, TumblingEventTimeWindows, WatermarkStrategy, countAggregate, filesystem } from ${JSON.stringify(dist)};
const settings = ${JSON.stringify(settings)};
class CountPerKey {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(value, context, out) {
    // The subtask that owns the hot key is the slow one: about 20 µs per record.
    if (value.padding !== undefined) { const until = performance.now() + 0.02; while (performance.now() < until); }
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect(context.getCurrentKey() + "=" + count);
  }
}
export function createJob(launch) {
  if (settings.dieOnce !== undefined && launch.subtaskIndex === 1 && !existsSync(settings.dieOnce)) {
    writeFileSync(settings.dieOnce, "died");
    setTimeout(() => { throw new Error("subtask 1 blew up"); }, 700);
  }
  const job = new Job({
    jobId: settings.jobId,
    parallelism: settings.parallelism,
    checkpointing: { interval: 100, storage: filesystem(settings.checkpoints) },
    restartStrategy: settings.dieOnce === undefined ? { type: "none" } : { type: "fixed-delay", attempts: 3, delay: 100 },
    ...launch,
  });
  const input = settings.input;
  const sink = () => new FileSink({ directory: settings.output });
  if (input.kind === "files") {
    job.fromSource(new FileLinesSource({ paths: input.paths }), { uid: "lines" })
      .keyBy((line) => line)
      .process(() => new CountPerKey(), { uid: "count" })
      .sinkTo(sink, { uid: "out" });
  } else if (input.kind === "generator") {
    const padding = "x".repeat(input.skewedPadding ?? 0);
    const generate = input.skewedPadding === undefined
      ? (i) => ({ key: "k" + (i % input.keys) })
      : (i) => ({ key: i % 10 === 0 ? "k" + (i % input.keys) : "hot", padding });
    job.fromSource(new GeneratorSource({ ...(input.unbounded ? {} : { count: input.count }), splits: 5, batchSize: 64, generate, ...(input.recordsPerSecond === undefined ? {} : { recordsPerSecond: input.recordsPerSecond }) }), { uid: "keys" })
      .keyBy((record) => record.key)
      .process(() => new CountPerKey(), { uid: "count" })
      .sinkTo(sink, { uid: "out" });
  } else if (input.kind === "windows-one-split") {
    job.fromSource(
      new GeneratorSource({ splits: 1, recordsPerSecond: 5000, generate: (i) => ({ user: "u" + (i % input.keys), at: i }), timestampOf: (i) => i }),
      { uid: "clicks", watermarks: WatermarkStrategy.forMonotonousTimestamps() },
    )
      .keyBy((click) => click.user)
      .window(TumblingEventTimeWindows.of(100))
      .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), { uid: "count" })
      .sinkTo(sink, { uid: "out" });
  } else {
    const marker = settings.serializedMarker;
    const serializer = {
      serialize: (click) => Buffer.from(click.user + "," + click.at),
      deserialize: (bytes) => {
        if (!existsSync(marker)) writeFileSync(marker, "deserialized");
        const [user, at] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString().split(",");
        return { user, at: Number(at) };
      },
    };
    job.fromSource(
      new GeneratorSource({ count: input.count, splits: 3, generate: (i) => ({ user: "u" + (i % input.keys), at: i }) }),
      { uid: "clicks", watermarks: { timestampAssigner: (click) => click.at, maxOutOfOrderness: 100 } },
    )
      .keyBy((click) => click.user, marker === undefined ? {} : { serializer })
      .window(TumblingEventTimeWindows.of(1000))
      .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), { uid: "count" })
      .sinkTo(sink, { uid: "out" });
  }
  return job;
}
`;
}

async function folder(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), "onceflow-keyed-threads-"));
  cleanups.push(() => rm(directory, { recursive: true, force: true }));
  return directory;
}

async function runInThreads(
  directory: string,
  settings: Settings,
  resourceLimits?: { maxOldGenerationSizeMb: number },
  stopAfterMs?: number,
): Promise<unknown> {
  const module = join(directory, `job-${settings.parallelism}-${Math.random().toString(36).slice(2)}.mjs`);
  await writeFile(module, jobModule(settings));
  const threads = await runSubtasksInThreads({
    module: pathToFileURL(module),
    ...(resourceLimits === undefined ? {} : { resourceLimits }),
  });
  expect(threads.threadIds).toHaveLength(settings.parallelism);
  if (stopAfterMs !== undefined) setTimeout(() => threads.stop(), stopAfterMs);
  return threads.finished;
}

/** The highest count committed per key. */
function highestCounts(rows: readonly string[]): Record<string, number> {
  const highest: Record<string, number> = {};
  for (const row of rows) {
    const [key, count] = row.split("=") as [string, string];
    highest[key] = Math.max(highest[key] ?? 0, Number(count));
  }
  return highest;
}

describe("keyBy between subtask threads: one state per key for the whole job", { timeout: 120_000 }, () => {
  it("two files holding key 'a' three times each count to 6 in two threads", async () => {
    const directory = await folder();
    const paths = [join(directory, "one.txt"), join(directory, "two.txt")];
    for (const path of paths) await writeFile(path, "a\na\na\n");
    await runInThreads(directory, {
      jobId: "two-files",
      parallelism: 2,
      checkpoints: join(directory, "checkpoints"),
      output: join(directory, "out"),
      input: { kind: "files", paths },
    });
    const rows = await readCommittedFiles<string>(join(directory, "out"));
    expect([...rows].sort()).toEqual(["a=1", "a=2", "a=3", "a=4", "a=5", "a=6"]);
  });

  it("lets its threads end by themselves once the job has closed them, so that the process can exit", async () => {
    const directory = await folder();
    const path = join(directory, "keys.txt");
    await writeFile(path, "a\nb\nc\n");
    const exits: Array<Promise<number>> = [];
    const onWorker = (worker: import("node:worker_threads").Worker) =>
      exits.push(new Promise<number>((resolve) => worker.once("exit", resolve)));
    process.on("worker", onWorker);
    try {
      await runInThreads(directory, {
        jobId: "threads-end",
        parallelism: 2,
        checkpoints: join(directory, "checkpoints"),
        output: join(directory, "out"),
        input: { kind: "files", paths: [path] },
      });
    } finally {
      process.off("worker", onWorker);
    }
    expect(exits).toHaveLength(2);
    // 0: the thread's event loop ran out; 1: the main thread had to terminate it after its grace.
    expect(await Promise.all(exits)).toEqual([0, 0]);
  });

  it.each([
    ["as structured clones", false],
    ["as the bytes of the keyBy's serializer", true],
  ])(
    "a windowed count per key in three threads, records crossing %s, equals the count computed from the input",
    async (_, serialized) => {
      const directory = await folder();
      const count = 30_000;
      const keys = 37;
      const marker = join(directory, "deserialized");
      await runInThreads(directory, {
        jobId: "windows",
        parallelism: 3,
        checkpoints: join(directory, "checkpoints"),
        output: join(directory, "out"),
        input: { kind: "windows", count, keys },
        ...(serialized ? { serializedMarker: marker } : {}),
      });
      expect(existsSync(marker)).toBe(serialized);
      const rows = await readCommittedFiles<{ user: string; start: number; count: number }>(
        join(directory, "out"),
      );
      const expected = new Map<string, number>();
      for (let i = 0; i < count; i++) {
        const name = `u${i % keys}@${Math.floor(i / 1000) * 1000}`;
        expected.set(name, (expected.get(name) ?? 0) + 1);
      }
      const actual = new Map(rows.map((row) => [`${row.user}@${row.start}`, row.count]));
      expect(rows).toHaveLength(expected.size);
      expect(actual).toEqual(expected);
    },
  );

  it("a subtask thread without a split does not hold back the watermark in the other threads", async () => {
    const directory = await folder();
    await runInThreads(
      directory,
      {
        jobId: "one-split",
        parallelism: 2,
        checkpoints: join(directory, "checkpoints"),
        output: join(directory, "out"),
        input: { kind: "windows-one-split", keys: 10 },
      },
      undefined,
      2000,
    );
    const rows = await readCommittedFiles<{ user: string; start: number; count: number }>(
      join(directory, "out"),
    );
    // Windows of every key fired, in both subtasks: the idle one's channel says it is idle.
    expect(new Set(rows.map((row) => row.user)).size).toBe(10);
    expect(rows.length).toBeGreaterThan(50);
    expect(rows.every((row) => row.count === 10)).toBe(true);
  });

  it("rescales keyed state between threads 2 → 3 → 1: every key goes on from its count", async () => {
    const directory = await folder();
    const common = {
      jobId: "rescale",
      checkpoints: join(directory, "checkpoints"),
      output: join(directory, "out"),
    };
    // Each bounded run ends with a final checkpoint; the next reads on from it up to its larger count.
    await runInThreads(directory, {
      ...common,
      parallelism: 2,
      input: { kind: "generator", count: 700, keys: 7 },
    });
    await runInThreads(directory, {
      ...common,
      parallelism: 3,
      input: { kind: "generator", count: 1400, keys: 7 },
    });
    await runInThreads(directory, {
      ...common,
      parallelism: 1,
      input: { kind: "generator", count: 2100, keys: 7 },
    });
    const rows = await readCommittedFiles<string>(join(directory, "out"));
    expect(new Set(rows).size).toBe(2100);
    expect(rows).toHaveLength(2100);
    expect(highestCounts(rows)).toEqual(
      Object.fromEntries(Array.from({ length: 7 }, (_, k) => [`k${k}`, 300])),
    );
  });

  it("stop() ends every thread with a final checkpoint; a restart goes on with every key's count", async () => {
    const directory = await folder();
    const common = {
      jobId: "stopped",
      checkpoints: join(directory, "checkpoints"),
      output: join(directory, "out"),
    };
    const input = { kind: "generator", count: 0, keys: 7, recordsPerSecond: 3000, unbounded: true } as const;
    const first = (await runInThreads(directory, { ...common, parallelism: 2, input }, undefined, 1500)) as {
      subtasks: Array<{ endedBy: string }>;
    };
    expect(first.subtasks.map((subtask) => subtask.endedBy)).toEqual(["stop", "stop"]);
    await runInThreads(directory, { ...common, parallelism: 3, input }, undefined, 1500);
    const rows = await readCommittedFiles<string>(join(directory, "out"));
    expect(rows.length).toBeGreaterThan(1000);
    // Every key's committed counts are 1, 2, …, n: none lost, none twice, across the stop and restart.
    const countsOf = new Map<string, number[]>();
    for (const row of rows) {
      const [key, count] = row.split("=") as [string, string];
      countsOf.set(key, [...(countsOf.get(key) ?? []), Number(count)]);
    }
    expect(countsOf.size).toBe(7);
    for (const counts of countsOf.values()) {
      counts.sort((a, b) => a - b);
      expect(counts).toEqual(Array.from({ length: counts.length }, (_, index) => index + 1));
    }
  });

  it("a thread that dies fails the attempt; the restart starts every thread again, counts exactly once", async () => {
    const directory = await folder();
    const count = 3000;
    const result = (await runInThreads(directory, {
      jobId: "thread-dies",
      parallelism: 2,
      checkpoints: join(directory, "checkpoints"),
      output: join(directory, "out"),
      dieOnce: join(directory, "died"),
      input: { kind: "generator", count, keys: 7, recordsPerSecond: 2000 },
    })) as { subtasks: Array<{ restarts: number }> };
    expect(result.subtasks.map((subtask) => subtask.restarts)).toEqual([1, 1]);
    const rows = await readCommittedFiles<string>(join(directory, "out"));
    expect(rows).toHaveLength(count);
    expect(new Set(rows).size).toBe(count);
    const expected = Object.fromEntries(
      Array.from({ length: 7 }, (_, key) => [`k${key}`, Math.floor(count / 7) + (key < count % 7 ? 1 : 0)]),
    );
    expect(highestCounts(rows)).toEqual(expected);
  });

  it("one key with 90 % of the records: counts are right and memory stays bounded (backpressure)", async () => {
    const directory = await folder();
    // 100,000 records of 8 KiB, 800 MiB in all; the subtask owning the hot key is the slow one. A
    // channel that took whatever its sender sent would hold hundreds of MiB waiting for it (in the
    // heap or in the port's queue; about 600 MiB measured): bounded, the process grows by a few
    // channel capacities plus the sent copies each thread's heap holds until its next garbage
    // collection (about 180 MiB measured).
    const count = 100_000;
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampling = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    try {
      await runInThreads(directory, {
        jobId: "skew",
        parallelism: 2,
        checkpoints: join(directory, "checkpoints"),
        output: join(directory, "out"),
        input: { kind: "generator", count, keys: 10, skewedPadding: 8192 },
      });
    } finally {
      clearInterval(sampling);
    }
    const grewMiB = (peak - before) / 2 ** 20;
    console.log(`skew: the process grew by ${grewMiB.toFixed(0)} MiB at most`);
    expect(grewMiB).toBeLessThan(320);
    const rows = await readCommittedFiles<string>(join(directory, "out"));
    expect(rows).toHaveLength(count);
    const expected: Record<string, number> = { hot: count * 0.9 };
    for (let i = 0; i < count; i += 10) expected[`k${i % 10}`] = (expected[`k${i % 10}`] ?? 0) + 1;
    expect(highestCounts(rows)).toEqual(expected);
  });
});
