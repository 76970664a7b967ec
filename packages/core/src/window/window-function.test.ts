import { describe, expect, it } from "vitest";
import type {
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
  TimerService,
} from "../api/process-function.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { silentLogger } from "../observability/logger.js";
import { createMemoryMetrics, type MemoryMetrics } from "../observability/metrics.js";
import type { ListState, MapState, StateDescriptor, ValueState } from "../state/state.js";
import { type AggregateFunction, countAggregate } from "./aggregate-function.js";
import type { TimeWindow } from "./time-window.js";
import {
  SlidingEventTimeWindows,
  TumblingEventTimeWindows,
  TumblingProcessingTimeWindows,
} from "./window-assigners.js";
import {
  createWindowAggregateFunction,
  createWindowReduceFunction,
  LATE_RECORDS_DROPPED_METRIC,
} from "./window-function.js";

type Domain = "event-time" | "processing-time";

/** Everything the harness keeps, as plain data: what a checkpoint of the operator holds. */
interface HarnessSnapshot {
  values: Map<string, Map<string, unknown>>;
  lists: Map<string, Map<string, unknown[]>>;
  maps: Map<string, Map<string, Map<unknown, unknown>>>;
  timers: Array<{ domain: Domain; key: string; time: number }>;
  watermark: number;
  processingTime: number;
}

/**
 * A tiny in-memory keyed operator: keyed state per (state name, key), a timer queue per domain,
 * a watermark and a processing-time clock that tests move by hand.
 */
class Harness<K, IN, OUT> {
  readonly output: Array<{ value: OUT; timestamp: number | undefined }> = [];
  readonly metrics: MemoryMetrics = createMemoryMetrics();
  private values = new Map<string, Map<string, unknown>>();
  private lists = new Map<string, Map<string, unknown[]>>();
  private maps = new Map<string, Map<string, Map<unknown, unknown>>>();
  private timers = new Map<string, { domain: Domain; key: string; time: number }>();
  private watermark = Number.NEGATIVE_INFINITY;
  private processingTime = 0;
  private currentKey = "";

  constructor(
    private readonly fn: KeyedProcessFunction<K, IN, OUT>,
    restored?: HarnessSnapshot,
  ) {
    if (restored !== undefined) {
      const copy = structuredClone(restored);
      this.values = copy.values;
      this.lists = copy.lists;
      this.maps = copy.maps;
      for (const timer of copy.timers) this.timers.set(`${timer.domain}|${timer.key}|${timer.time}`, timer);
      this.watermark = copy.watermark;
      this.processingTime = copy.processingTime;
    }
  }

  async open(): Promise<this> {
    await this.fn.open?.(this.runtimeContext());
    return this;
  }

  async process(key: K, value: IN, timestamp?: number): Promise<void> {
    this.currentKey = JSON.stringify(key);
    await this.fn.processElement(
      value,
      { timestamp: () => timestamp, getCurrentKey: () => key, timerService: () => this.timerService() },
      this.collector(),
    );
  }

  async advanceWatermark(watermark: number): Promise<void> {
    this.watermark = watermark;
    await this.fire("event-time", watermark);
  }

  async advanceProcessingTime(now: number): Promise<void> {
    this.processingTime = now;
    await this.fire("processing-time", now);
  }

  timerCount(): number {
    return this.timers.size;
  }

  snapshot(): HarnessSnapshot {
    return structuredClone({
      values: this.values,
      lists: this.lists,
      maps: this.maps,
      timers: [...this.timers.values()],
      watermark: this.watermark,
      processingTime: this.processingTime,
    });
  }

  /** How many entries the named map state holds over all keys. */
  mapStateSize(name: string): number {
    let size = 0;
    for (const perKey of this.maps.get(name)?.values() ?? []) size += perKey.size;
    return size;
  }

  private async fire(domain: Domain, upTo: number): Promise<void> {
    for (;;) {
      // Lowest time first, as the runtime's timer queue does.
      let next: { domain: Domain; key: string; time: number } | undefined;
      for (const timer of this.timers.values()) {
        if (timer.domain === domain && timer.time <= upTo && (next === undefined || timer.time < next.time)) {
          next = timer;
        }
      }
      if (next === undefined) return;
      this.timers.delete(`${next.domain}|${next.key}|${next.time}`);
      this.currentKey = next.key;
      const key = JSON.parse(next.key) as K;
      const context: OnTimerContext<K> = {
        timestamp: () => next.time,
        getCurrentKey: () => key,
        timerService: () => this.timerService(),
        timeDomain: () => domain,
      };
      await this.fn.onTimer?.(next.time, context, this.collector());
    }
  }

  private collector() {
    return { collect: (value: OUT, timestamp?: number) => this.output.push({ value, timestamp }) };
  }

  private timerService(): TimerService {
    const register = (domain: Domain, time: number) =>
      this.timers.set(`${domain}|${this.currentKey}|${time}`, { domain, key: this.currentKey, time });
    const remove = (domain: Domain, time: number) =>
      this.timers.delete(`${domain}|${this.currentKey}|${time}`);
    return {
      currentProcessingTime: () => this.processingTime,
      currentWatermark: () => this.watermark,
      registerEventTimeTimer: (time) => register("event-time", time),
      registerProcessingTimeTimer: (time) => register("processing-time", time),
      deleteEventTimeTimer: (time) => remove("event-time", time),
      deleteProcessingTimeTimer: (time) => remove("processing-time", time),
    };
  }

  private runtimeContext(): KeyedRuntimeContext {
    const perKey = <T>(stores: Map<string, Map<string, T>>, name: string): Map<string, T> => {
      let store = stores.get(name);
      if (store === undefined) {
        store = new Map();
        stores.set(name, store);
      }
      return store;
    };
    const harness = this;
    return {
      jobId: "test-job",
      checkpointingInterval: undefined,
      operatorUid: "window",
      subtaskIndex: 0,
      parallelism: 1,
      attemptNumber: 0,
      incarnation: 1,
      logger: silentLogger,
      metrics: this.metrics,
      getState<T>(descriptor: StateDescriptor<T>): ValueState<T> {
        const store = perKey(harness.values, descriptor.name);
        return {
          value: () => store.get(harness.currentKey) as T | undefined,
          update: (value) => store.set(harness.currentKey, value),
          clear: () => store.delete(harness.currentKey),
        };
      },
      getListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
        const store = perKey(harness.lists, descriptor.name);
        const list = () => (store.get(harness.currentKey) ?? []) as T[];
        return {
          get: () => [...list()],
          add: (value) => store.set(harness.currentKey, [...list(), value]),
          addAll: (values) => store.set(harness.currentKey, [...list(), ...values]),
          update: (values) => store.set(harness.currentKey, [...values]),
          clear: () => store.delete(harness.currentKey),
        };
      },
      getMapState<MK, MV>(descriptor: StateDescriptor<Map<MK, MV>>): MapState<MK, MV> {
        const store = perKey(harness.maps, descriptor.name);
        const map = (create: boolean) => {
          let current = store.get(harness.currentKey) as Map<MK, MV> | undefined;
          if (current === undefined && create) {
            current = new Map();
            store.set(harness.currentKey, current as Map<unknown, unknown>);
          }
          return current;
        };
        const drop = () => {
          if (map(false)?.size === 0) store.delete(harness.currentKey);
        };
        return {
          get: (key) => map(false)?.get(key),
          put: (key, value) => void map(true)?.set(key, value),
          contains: (key) => map(false)?.has(key) ?? false,
          remove: (key) => {
            map(false)?.delete(key);
            drop();
          },
          entries: () => [...(map(false)?.entries() ?? [])],
          keys: () => [...(map(false)?.keys() ?? [])],
          values: () => [...(map(false)?.values() ?? [])],
          isEmpty: () => (map(false)?.size ?? 0) === 0,
          clear: () => store.delete(harness.currentKey),
        };
      },
    };
  }
}

interface Counted {
  key: string;
  start: number;
  end: number;
  count: number;
}

const describeCount = (key: string, window: TimeWindow, count: number): Counted => ({
  key,
  start: window.start,
  end: window.end,
  count,
});

function countPerWindow(assigner: Parameters<typeof createWindowAggregateFunction>[0], lateness = 0) {
  const late: Array<[string, number]> = [];
  const fn = createWindowAggregateFunction(assigner, countAggregate<string>(), describeCount, {
    allowedLateness: lateness,
    onLateRecord: (value, timestamp) => late.push([value, timestamp]),
  });
  return { fn, late };
}

describe("window aggregate, event time", () => {
  it("counts per key and tumbling window, firing when the watermark passes the window's end", async () => {
    const { fn } = countPerWindow(TumblingEventTimeWindows.of(1000));
    const harness = await new Harness(fn).open();
    for (const [key, ts] of [
      ["a", 0],
      ["a", 999],
      ["b", 500],
      ["a", 1000],
      ["b", 1500],
      ["b", 1999],
      ["a", 2500],
    ] as const) {
      await harness.process(key, `${key}@${ts}`, ts);
    }
    await harness.advanceWatermark(998);
    expect(harness.output).toEqual([]);
    await harness.advanceWatermark(999);
    expect(harness.output).toEqual([
      { value: { key: "a", start: 0, end: 1000, count: 2 }, timestamp: 999 },
      { value: { key: "b", start: 0, end: 1000, count: 1 }, timestamp: 999 },
    ]);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.slice(2)).toEqual([
      { value: { key: "a", start: 1000, end: 2000, count: 1 }, timestamp: 1999 },
      { value: { key: "b", start: 1000, end: 2000, count: 2 }, timestamp: 1999 },
      { value: { key: "a", start: 2000, end: 3000, count: 1 }, timestamp: 2999 },
    ]);
    // Fired windows leave nothing behind.
    expect(harness.mapStateSize("window-contents")).toBe(0);
    expect(harness.timerCount()).toBe(0);
  });

  it("counts each record in every sliding window it falls into", async () => {
    const { fn } = countPerWindow(SlidingEventTimeWindows.of(1000, 500));
    const harness = await new Harness(fn).open();
    for (const ts of [100, 600, 1100]) await harness.process("k", "x", ts);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.map((o) => [o.value.start, o.value.end, o.value.count, o.timestamp])).toEqual([
      [-500, 500, 1, 499],
      [0, 1000, 2, 999],
      [500, 1500, 2, 1499],
      [1000, 2000, 1, 1999],
    ]);
  });

  it("drops records whose every window has closed, counting them and telling the callback", async () => {
    const { fn, late } = countPerWindow(TumblingEventTimeWindows.of(1000));
    const harness = await new Harness(fn).open();
    await harness.process("a", "on-time", 100);
    await harness.advanceWatermark(999);
    await harness.process("a", "late", 998);
    await harness.process("a", "next-window", 1000);
    expect(harness.metrics.read(LATE_RECORDS_DROPPED_METRIC)).toBe(1);
    expect(late).toEqual([["late", 998]]);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.map((o) => [o.value.start, o.value.count])).toEqual([
      [0, 1],
      [1000, 1],
    ]);
  });

  it("a record late for some sliding windows still counts in the open ones and is not dropped", async () => {
    const { fn, late } = countPerWindow(SlidingEventTimeWindows.of(1000, 500));
    const harness = await new Harness(fn).open();
    await harness.advanceWatermark(999); // [0, 1000) has closed, [500, 1500) is open
    await harness.process("k", "x", 700);
    expect(harness.metrics.read(LATE_RECORDS_DROPPED_METRIC)).toBe(0);
    expect(late).toEqual([]);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.map((o) => [o.value.start, o.value.count])).toEqual([[500, 1]]);
  });

  it("with allowed lateness, fires again for late records and drops them only after the lateness", async () => {
    const { fn, late } = countPerWindow(TumblingEventTimeWindows.of(1000), 500);
    const harness = await new Harness(fn).open();
    await harness.process("a", "x", 10);
    await harness.advanceWatermark(999);
    expect(harness.output.map((o) => o.value.count)).toEqual([1]);
    await harness.process("a", "late-but-allowed", 20);
    expect(harness.output.map((o) => [o.value.count, o.timestamp])).toEqual([
      [1, 999],
      [2, 999],
    ]);
    await harness.advanceWatermark(1498);
    expect(harness.mapStateSize("window-contents")).toBe(1);
    await harness.advanceWatermark(1499); // maxTimestamp + lateness: cleaned up
    expect(harness.mapStateSize("window-contents")).toBe(0);
    await harness.process("a", "too-late", 30);
    expect(late).toEqual([["too-late", 30]]);
    expect(harness.output).toHaveLength(2);
  });

  it("fires every open window in order when the input ends (watermark +Infinity)", async () => {
    const { fn } = countPerWindow(TumblingEventTimeWindows.of(10));
    const harness = await new Harness(fn).open();
    for (let ts = 95; ts >= 0; ts -= 5) await harness.process("k", "x", ts);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.map((o) => o.value.start)).toEqual([0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
    expect(harness.output.every((o) => o.value.count === 2)).toBe(true);
  });

  it("handles negative timestamps and offsets", async () => {
    const { fn } = countPerWindow(TumblingEventTimeWindows.of(100, 30));
    const harness = await new Harness(fn).open();
    for (const ts of [-71, -70, -1, 29, 30]) await harness.process("k", "x", ts);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output.map((o) => [o.value.start, o.value.count])).toEqual([
      [-170, 1],
      [-70, 3],
      [30, 1],
    ]);
  });

  it("after a restore, the windows and timers of the snapshot fire with the same counts", async () => {
    const assigner = SlidingEventTimeWindows.of(1000, 500);
    const inputs = Array.from({ length: 60 }, (_, i) => ({ key: `k${i % 3}`, ts: i * 37 }));

    // Reference: one run without failure.
    const reference = await new Harness(countPerWindow(assigner).fn).open();
    for (const { key, ts } of inputs) await reference.process(key, "x", ts);
    await reference.advanceWatermark(Number.POSITIVE_INFINITY);

    // Failing run: snapshot after 30 records and a watermark, lose the rest, restore and replay.
    const first = await new Harness(countPerWindow(assigner).fn).open();
    for (const { key, ts } of inputs.slice(0, 30)) await first.process(key, "x", ts);
    await first.advanceWatermark(700);
    const checkpoint = first.snapshot();
    const emittedBeforeCheckpoint = first.output.length;
    for (const { key, ts } of inputs.slice(30, 45)) await first.process(key, "x", ts);
    await first.advanceWatermark(1500); // output after the checkpoint is lost with the failure

    const second = await new Harness(countPerWindow(assigner).fn, checkpoint).open();
    expect(second.timerCount()).toBeGreaterThan(0);
    for (const { key, ts } of inputs.slice(30)) await second.process(key, "x", ts);
    await second.advanceWatermark(Number.POSITIVE_INFINITY);

    const recovered = [...first.output.slice(0, emittedBeforeCheckpoint), ...second.output];
    expect(recovered).toEqual(reference.output);
    expect(reference.output.reduce((sum, o) => sum + o.value.count, 0)).toBe(60 * 2);
  });

  it("keeps only plain data in state", async () => {
    const fn = createWindowAggregateFunction(TumblingEventTimeWindows.of(1000), {
      createAccumulator: () => ({ sum: 0, items: [] as string[] }),
      add: (value: string, acc) => ({ sum: acc.sum + value.length, items: [...acc.items, value] }),
      getResult: (acc) => acc,
    });
    const harness = await new Harness(fn).open();
    await harness.process("k", "abc", 5);
    const state = harness.snapshot().maps.get("window-contents");
    expect(state).toEqual(new Map([['"k"', new Map([[0, { end: 1000, acc: { sum: 3, items: ["abc"] } }]])]]));
  });

  it("without a result function emits the aggregate's result", async () => {
    const average: AggregateFunction<number, { sum: number; count: number }, number> = {
      createAccumulator: () => ({ sum: 0, count: 0 }),
      add: (value, acc) => ({ sum: acc.sum + value, count: acc.count + 1 }),
      getResult: (acc) => acc.sum / acc.count,
    };
    const harness = await new Harness(
      createWindowAggregateFunction<string, number, { sum: number; count: number }, number>(
        TumblingEventTimeWindows.of(100),
        average,
      ),
    ).open();
    for (const [value, ts] of [
      [2, 1],
      [4, 2],
      [10, 150],
    ]) {
      await harness.process("k", value as number, ts);
    }
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output).toEqual([
      { value: 3, timestamp: 99 },
      { value: 10, timestamp: 199 },
    ]);
  });

  it("fails clearly on a record without an event time", async () => {
    const harness = await new Harness(countPerWindow(TumblingEventTimeWindows.of(1000)).fn).open();
    await expect(harness.process("k", "x")).rejects.toThrow(ConfigurationError);
    await expect(harness.process("k", "x")).rejects.toThrow(/TumblingEventTimeWindows\(1000\)/);
  });
});

describe("window reduce", () => {
  it("reduces per window, with and without a result function", async () => {
    const plain = await new Harness(
      createWindowReduceFunction<string, number>(TumblingEventTimeWindows.of(10), (a, b) => a + b),
    ).open();
    const described = await new Harness(
      createWindowReduceFunction(
        TumblingEventTimeWindows.of(10),
        (a: number, b: number) => Math.max(a, b),
        (key: string, window, max) => `${key}[${window.start},${window.end})=${max}`,
      ),
    ).open();
    for (const [value, ts] of [
      [1, 0],
      [5, 3],
      [2, 9],
      [7, 10],
    ] as const) {
      await plain.process("k", value, ts);
      await described.process("k", value, ts);
    }
    await plain.advanceWatermark(Number.POSITIVE_INFINITY);
    await described.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(plain.output).toEqual([
      { value: 8, timestamp: 9 },
      { value: 7, timestamp: 19 },
    ]);
    expect(described.output.map((o) => o.value)).toEqual(["k[0,10)=5", "k[10,20)=7"]);
  });

  it("reduces values that are falsy or undefined correctly", async () => {
    const harness = await new Harness(
      createWindowReduceFunction<string, number | undefined>(TumblingEventTimeWindows.of(10), (a, b) =>
        a === undefined ? b : b === undefined ? a : a + b,
      ),
    ).open();
    await harness.process("k", undefined, 1);
    await harness.process("k", 0, 2);
    await harness.process("k", 3, 3);
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output).toEqual([{ value: 3, timestamp: 9 }]);
  });
});

describe("window aggregate, processing time", () => {
  it("assigns by the clock and fires when processing time passes the window's end", async () => {
    const { fn } = countPerWindow(TumblingProcessingTimeWindows.of(1000));
    const harness = await new Harness(fn).open();
    await harness.advanceProcessingTime(100);
    await harness.process("a", "x");
    await harness.process("b", "x", 5_000_000); // the event time is ignored
    await harness.advanceProcessingTime(1200);
    await harness.process("a", "y");
    expect(harness.output.map((o) => [o.value.key, o.value.start, o.value.count, o.timestamp])).toEqual([
      ["a", 0, 1, 999],
      ["b", 0, 1, 999],
    ]);
    // The watermark plays no part.
    await harness.advanceWatermark(Number.POSITIVE_INFINITY);
    expect(harness.output).toHaveLength(2);
    await harness.advanceProcessingTime(2000);
    expect(harness.output.map((o) => [o.value.key, o.value.start, o.value.count])).toEqual([
      ["a", 0, 1],
      ["b", 0, 1],
      ["a", 1000, 1],
    ]);
    expect(harness.metrics.read(LATE_RECORDS_DROPPED_METRIC)).toBe(0);
  });
});

describe("window arguments", () => {
  it("rejects a negative lateness, a non-assigner and a malformed aggregate", () => {
    expect(() =>
      createWindowAggregateFunction(TumblingEventTimeWindows.of(10), countAggregate(), undefined, {
        allowedLateness: -1,
      }),
    ).toThrow(/window\.allowedLateness/);
    expect(() =>
      createWindowReduceFunction({} as unknown as TumblingEventTimeWindows, (a: number, b: number) => a + b),
    ).toThrow(/window\.assigner/);
    expect(() =>
      createWindowAggregateFunction(
        TumblingEventTimeWindows.of(10),
        {} as unknown as AggregateFunction<number, number, number>,
      ),
    ).toThrow(/window\.aggregate/);
    expect(() =>
      createWindowReduceFunction(
        TumblingEventTimeWindows.of(10),
        5 as unknown as (a: number, b: number) => number,
      ),
    ).toThrow(/window\.reduce/);
  });
});
