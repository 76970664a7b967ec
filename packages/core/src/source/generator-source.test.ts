import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { GeneratorSource, GeneratorSourceReader, type GeneratorSplit } from "./generator-source.js";

function drain<T>(reader: GeneratorSourceReader<T>): { records: T[]; batches: number } {
  const records: T[] = [];
  let batches = 0;
  for (;;) {
    const batch = reader.pollNext();
    if (batch === undefined) break;
    batches++;
    records.push(...batch.records);
  }
  return { records, batches };
}

describe("GeneratorSource", () => {
  it("is bounded with a count and continuous without", () => {
    expect(new GeneratorSource({ count: 3, generate: (i) => i }).boundedness).toBe("bounded");
    expect(new GeneratorSource({ generate: (i) => i }).boundedness).toBe("continuous");
  });

  it("lists one split per splitIndex, each starting at its own index", async () => {
    const source = new GeneratorSource({ count: 10, splits: 3, generate: (i) => i });
    expect(await source.discoverSplits()).toEqual([
      { splitId: "generator-0", splitIndex: 0, splits: 3, nextIndex: 0 },
      { splitId: "generator-1", splitIndex: 1, splits: 3, nextIndex: 1 },
      { splitId: "generator-2", splitIndex: 2, splits: 3, nextIndex: 2 },
    ]);
  });

  it("assigns split k to subtask k % parallelism", async () => {
    const source = new GeneratorSource({ count: 10, splits: 5, generate: (i) => i });
    const splits = await source.discoverSplits();
    expect(splits.map((split) => source.assignSplit(split, 2))).toEqual([0, 1, 0, 1, 0]);
  });

  it("gives each split the indices k, k+splits, … below count", async () => {
    const source = new GeneratorSource({ count: 10, splits: 3, generate: (i, k) => `${k}:${i}` });
    const splits = await source.discoverSplits();
    const perSplit = splits.map((split) => {
      const reader = source.createReader();
      reader.addSplits([split]);
      return drain(reader).records;
    });
    expect(perSplit).toEqual([
      ["0:0", "0:3", "0:6", "0:9"],
      ["1:1", "1:4", "1:7"],
      ["2:2", "2:5", "2:8"],
    ]);
  });

  it("produces every index exactly once across all splits and subtasks", async () => {
    const source = new GeneratorSource({ count: 10_007, splits: 7, generate: (i) => i, batchSize: 100 });
    const splits = await source.discoverSplits();
    const seen: number[] = [];
    for (let subtask = 0; subtask < 3; subtask++) {
      const reader = source.createReader();
      reader.addSplits(splits.filter((split) => source.assignSplit(split, 3) === subtask));
      seen.push(...drain(reader).records);
      expect(reader.isFinished()).toBe(true);
    }
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 10_007 }, (_, i) => i));
  });

  it("cuts batches at batchSize and takes splits in turn", async () => {
    const source = new GeneratorSource({ count: 10, splits: 2, batchSize: 2, generate: (i) => i });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    expect(reader.pollNext()).toEqual({ splitId: "generator-0", records: [0, 2] });
    expect(reader.pollNext()).toEqual({ splitId: "generator-1", records: [1, 3] });
    expect(reader.pollNext()).toEqual({ splitId: "generator-0", records: [4, 6] });
  });

  it("fills timestamps from timestampOf", async () => {
    const source = new GeneratorSource({ count: 4, generate: (i) => i, timestampOf: (i) => 1000 + i * 10 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    expect(reader.pollNext()).toEqual({
      splitId: "generator-0",
      records: [0, 1, 2, 3],
      timestamps: [1000, 1010, 1020, 1030],
    });
  });

  it("snapshots the next index and continues exactly there after a restore", async () => {
    const source = new GeneratorSource({ count: 20, splits: 2, batchSize: 3, generate: (i) => i });
    const first = source.createReader();
    first.addSplits(await source.discoverSplits());
    const before = [first.pollNext(), first.pollNext(), first.pollNext()].flatMap((b) => b?.records ?? []);
    const snapshot = first.snapshotState(1);
    expect(snapshot).toEqual([
      { splitId: "generator-0", splitIndex: 0, splits: 2, nextIndex: 12 },
      { splitId: "generator-1", splitIndex: 1, splits: 2, nextIndex: 7 },
    ]);
    // Reading on after the snapshot is lost by the failure; the snapshot is unaffected.
    first.pollNext();
    expect(snapshot[0]?.nextIndex).toBe(12);

    const second = source.createReader();
    second.addSplits(structuredClone(snapshot));
    const after = drain(second).records;
    expect([...before, ...after].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it("is never finished when unbounded and keeps producing", async () => {
    const source = new GeneratorSource({ generate: (i) => i, batchSize: 5, splits: 2 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    for (let i = 0; i < 100; i++) expect(reader.pollNext()?.records).toHaveLength(5);
    expect(reader.isFinished()).toBe(false);
  });

  it("a bounded reader without splits is finished; an unbounded one waits for splits", async () => {
    const bounded = new GeneratorSource({ count: 5, generate: (i) => i }).createReader();
    expect(bounded.isFinished()).toBe(true);
    expect(bounded.pollNext()).toBeUndefined();

    const source = new GeneratorSource({ generate: (i) => i });
    const unbounded = source.createReader();
    expect(unbounded.isFinished()).toBe(false);
    let woke = false;
    const waiting = unbounded.isAvailable().then(() => {
      woke = true;
    });
    await Promise.resolve();
    expect(woke).toBe(false);
    unbounded.addSplits(await source.discoverSplits());
    await waiting;
    expect(woke).toBe(true);
  });

  it("count 0 produces nothing", async () => {
    const source = new GeneratorSource({ count: 0, splits: 2, generate: (i) => i });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    expect(reader.pollNext()).toBeUndefined();
    expect(reader.isFinished()).toBe(true);
  });

  it("rejects bad options with a ConfigurationError naming the setting", () => {
    const generate = (i: number) => i;
    expect(() => new GeneratorSource({ count: -1, generate })).toThrow(ConfigurationError);
    expect(() => new GeneratorSource({ count: 1.5, generate })).toThrow(/generator\.count/);
    expect(() => new GeneratorSource({ splits: 0, generate })).toThrow(/generator\.splits/);
    expect(() => new GeneratorSource({ batchSize: 0, generate })).toThrow(/generator\.batchSize/);
    expect(() => new GeneratorSource({ recordsPerSecond: 0, generate })).toThrow(
      /generator\.recordsPerSecond/,
    );
    expect(() => new GeneratorSource({ generate: undefined as unknown as (i: number) => number })).toThrow(
      /generator\.generate/,
    );
  });
});

describe("GeneratorSourceReader rate limit", () => {
  function limitedReader(recordsPerSecond: number, splits: GeneratorSplit[], clock: { now: number }) {
    return new GeneratorSourceReader(
      { generate: (i: number) => i, splits: splits[0]?.splits ?? 1, recordsPerSecond, batchSize: 1000 },
      () => clock.now,
    );
  }

  it("hands out records no faster than recordsPerSecond", async () => {
    const clock = { now: 1000 };
    const source = new GeneratorSource({ generate: (i) => i, recordsPerSecond: 100 });
    const splits = await source.discoverSplits();
    const reader = limitedReader(100, splits, clock);
    reader.addSplits(splits);
    let produced = 0;
    for (let step = 0; step < 200; step++) {
      produced += reader.pollNext()?.records.length ?? 0;
      clock.now += 10; // 2 s in total
    }
    // 100/s over 2 s, plus the one token a fresh reader starts with.
    expect(produced).toBeGreaterThanOrEqual(199);
    expect(produced).toBeLessThanOrEqual(201);
  });

  it("shares the rate among subtasks by their splits", async () => {
    const clock = { now: 0 };
    const source = new GeneratorSource({ generate: (i) => i, splits: 4, recordsPerSecond: 400 });
    const splits = await source.discoverSplits();
    const reader = limitedReader(400, splits, clock);
    reader.addSplits(splits.slice(0, 1)); // one of four splits: 100/s
    let produced = 0;
    for (let step = 0; step < 100; step++) {
      clock.now += 10;
      produced += reader.pollNext()?.records.length ?? 0;
    }
    expect(produced).toBeGreaterThanOrEqual(99);
    expect(produced).toBeLessThanOrEqual(101);
  });

  it("isAvailable resolves when the next token is due", async () => {
    const source = new GeneratorSource({ generate: (i) => i, recordsPerSecond: 50 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    while (reader.pollNext() !== undefined) {
      /* empty the bucket */
    }
    expect(reader.pollNext()).toBeUndefined();
    const started = performance.now();
    await reader.isAvailable();
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(5);
    expect(waited).toBeLessThan(5_000); // it does not hang (a timing bound only that loose: CI may be loaded)
    expect(reader.pollNext()?.records.length).toBeGreaterThanOrEqual(1);
    await reader.close();
  });

  it("close wakes a waiting isAvailable", async () => {
    const source = new GeneratorSource({ generate: (i) => i, recordsPerSecond: 0.001 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    reader.pollNext();
    const waiting = reader.isAvailable();
    await reader.close();
    await expect(waiting).resolves.toBeUndefined();
  });
});
