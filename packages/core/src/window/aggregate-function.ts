import type { TimeWindow } from "./time-window.js";

/**
 * Folds the records of a window into an accumulator, one at a time — Flink's `AggregateFunction`.
 * The accumulator is keyed state, checkpointed with the default serializer: keep it plain data
 * (numbers, strings, arrays, plain objects, Map, bigint), not class instances or closures. `add`
 * may change the accumulator in place and return it.
 *
 * @example
 * ```ts
 * const average: AggregateFunction<number, { sum: number; count: number }, number> = {
 *   createAccumulator: () => ({ sum: 0, count: 0 }),
 *   add: (value, acc) => ({ sum: acc.sum + value, count: acc.count + 1 }),
 *   getResult: (acc) => acc.sum / acc.count,
 *   merge: (a, b) => ({ sum: a.sum + b.sum, count: a.count + b.count }),
 * };
 * ```
 */
export interface AggregateFunction<IN, ACC, OUT> {
  createAccumulator(): ACC;
  add(value: IN, accumulator: ACC): ACC;
  getResult(accumulator: ACC): OUT;
  /** Combines two accumulators (for merging windows); optional for time windows. */
  merge?(a: ACC, b: ACC): ACC;
}

/**
 * Combines two values into one of the same type — Flink's `ReduceFunction`. `accumulated` is the
 * result so far, `value` the next record.
 *
 * @example
 * ```ts
 * const sum: ReduceFunction<number> = (accumulated, value) => accumulated + value;
 * ```
 */
export type ReduceFunction<T> = (accumulated: T, value: T) => T;

/**
 * Turns a window's aggregated result into the output record, knowing the key and the window —
 * the role of Flink's `ProcessWindowFunction` after an incremental aggregation.
 *
 * @example
 * ```ts
 * const describe: WindowResultFunction<string, number, { user: string; windowEnd: number; clicks: number }> =
 *   (user, window, clicks) => ({ user, windowEnd: window.end, clicks });
 * ```
 */
export type WindowResultFunction<K, R, OUT> = (key: K, window: TimeWindow, result: R) => OUT;

/**
 * Counts the records of a window.
 *
 * @example
 * ```ts
 * keyed.window(TumblingEventTimeWindows.of(60_000)).aggregate(countAggregate());
 * ```
 */
export function countAggregate<IN = unknown>(): AggregateFunction<IN, number, number> {
  return {
    createAccumulator: () => 0,
    add: (_value, count) => count + 1,
    getResult: (count) => count,
    merge: (a, b) => a + b,
  };
}
