import type { KeyedStateStore } from "../state/state.js";
import type { RuntimeContext } from "./checkpointed-function.js";

/**
 * Receives a function's output records. `timestamp` sets the record's event time (default: the
 * timestamp of the input record or timer).
 *
 * @example
 * ```ts
 * processElement(value: string, context: KeyedProcessContext<string>, out: Collector<string>) { out.collect(value.toUpperCase()); }
 * ```
 */
export interface Collector<T> {
  collect(value: T, timestamp?: number): void;
}

/**
 * Registers and deletes timers for the current key — Flink's `TimerService`. Timers are state:
 * they are checkpointed with the split and fire after a restore. Registering the same time twice
 * for a key makes one timer.
 *
 * @example
 * ```ts
 * context.timerService().registerEventTimeTimer(windowEnd - 1);
 * ```
 */
export interface TimerService {
  currentProcessingTime(): number;
  /** The event-time watermark of this subtask (`-Infinity` before the first). */
  currentWatermark(): number;
  registerEventTimeTimer(time: number): void;
  registerProcessingTimeTimer(time: number): void;
  deleteEventTimeTimer(time: number): void;
  deleteProcessingTimeTimer(time: number): void;
}

/**
 * What `processElement` receives besides the record.
 *
 * @example
 * ```ts
 * const key = context.getCurrentKey();
 * ```
 */
export interface KeyedProcessContext<K> {
  /** The record's event time, when it has one. */
  timestamp(): number | undefined;
  getCurrentKey(): K;
  timerService(): TimerService;
}

/**
 * What `onTimer` receives: which clock fired.
 *
 * @example
 * ```ts
 * onTimer(time: number, context: OnTimerContext<string>) { if (context.timeDomain() === "event-time") flush(); }
 * ```
 */
export interface OnTimerContext<K> extends KeyedProcessContext<K> {
  timeDomain(): "event-time" | "processing-time";
}

/**
 * The runtime context of a keyed function: subtask facts plus keyed state.
 *
 * @example
 * ```ts
 * open(context: KeyedRuntimeContext) { this.count = context.getState<number>({ name: "count" }); }
 * ```
 */
export interface KeyedRuntimeContext extends RuntimeContext, KeyedStateStore {}

/**
 * Processes the records of a keyed stream one by one, with keyed state and timers — Flink's
 * `KeyedProcessFunction`. Register state in `open`; state handles read and write the current key's
 * value. Methods may return a promise, but synchronous ones are faster.
 *
 * @example
 * ```ts
 * class CountPerKey implements KeyedProcessFunction<string, Click, [string, number]> {
 *   private count!: ValueState<number>;
 *   open(context: KeyedRuntimeContext) { this.count = context.getState({ name: "count" }); }
 *   processElement(click: Click, context: KeyedProcessContext<string>, out: Collector<[string, number]>) {
 *     const next = (this.count.value() ?? 0) + 1;
 *     this.count.update(next);
 *     out.collect([context.getCurrentKey(), next]);
 *   }
 * }
 * ```
 */
export interface KeyedProcessFunction<K, IN, OUT> {
  open?(context: KeyedRuntimeContext): Promise<void> | void;
  processElement(value: IN, context: KeyedProcessContext<K>, out: Collector<OUT>): Promise<void> | void;
  onTimer?(time: number, context: OnTimerContext<K>, out: Collector<OUT>): Promise<void> | void;
  close?(): Promise<void> | void;
}
