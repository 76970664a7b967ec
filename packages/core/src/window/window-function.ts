import type {
  Collector,
  KeyedProcessContext,
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
} from "../api/process-function.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { type Counter, MetricNames } from "../observability/metrics.js";
import type { MapState } from "../state/state.js";
import type { AggregateFunction, ReduceFunction, WindowResultFunction } from "./aggregate-function.js";
import { TimeWindow } from "./time-window.js";
import type { WindowAssigner } from "./window-assigners.js";

/**
 * The counter of records dropped because every window they belong to had closed (its end plus the
 * allowed lateness is at or behind the watermark).
 *
 * @example
 * ```ts
 * metrics.read(LATE_RECORDS_DROPPED_METRIC); // with createMemoryMetrics()
 * ```
 */
export const LATE_RECORDS_DROPPED_METRIC = MetricNames.lateRecordsDropped;

/**
 * Options of a window operator.
 *
 * @example
 * ```ts
 * const options: WindowOptions<Click> = { allowedLateness: 5000, onLateRecord: (click) => late.push(click) };
 * ```
 */
export interface WindowOptions<IN> {
  /**
   * Event time only: how long (ms) after a window's end records are still added to it (default 0).
   * Each such record fires the window again with the updated result; its state is kept until
   * `maxTimestamp + allowedLateness`. Flink's `allowedLateness`.
   */
  readonly allowedLateness?: number;
  /**
   * Called with each record that is dropped as late (besides counting it in
   * `onceflow_late_records_dropped_total`) — the role of Flink's `sideOutputLateData`.
   */
  readonly onLateRecord?: (value: IN, timestamp: number) => void;
  /** Name of the keyed map state holding the windows' accumulators (default "window-contents"). */
  readonly stateName?: string;
}

/** What a window's entry in keyed state holds: plain data, so it checkpoints as is. */
interface WindowContents<ACC> {
  readonly end: number;
  readonly acc: ACC;
}

interface WindowLogic<IN, ACC, R> {
  first(value: IN): ACC;
  add(value: IN, accumulator: ACC): ACC;
  result(accumulator: ACC): R;
}

class WindowOperatorFunction<K, IN, ACC, R, OUT> implements KeyedProcessFunction<K, IN, OUT> {
  private contents!: MapState<number, WindowContents<ACC>>;
  private lateDropped!: Counter;
  private lateLabels: Record<string, string> = {};
  private readonly eventTime: boolean;
  private readonly allowedLateness: number;

  constructor(
    private readonly assigner: WindowAssigner,
    private readonly logic: WindowLogic<IN, ACC, R>,
    private readonly windowFn: WindowResultFunction<K, R, OUT> | undefined,
    private readonly options: WindowOptions<IN>,
  ) {
    this.eventTime = assigner.isEventTime();
    // Processing time has no late records, so lateness has no meaning there (as in Flink).
    this.allowedLateness = this.eventTime ? (options.allowedLateness ?? 0) : 0;
  }

  open(context: KeyedRuntimeContext): void {
    this.contents = context.getMapState<number, WindowContents<ACC>>({
      name: this.options.stateName ?? "window-contents",
    });
    this.lateDropped = context.metrics.counter(
      LATE_RECORDS_DROPPED_METRIC,
      "Records dropped because every window they belong to had closed",
    );
    this.lateLabels = {
      job: context.jobId,
      operator: context.operatorUid,
      subtask: String(context.subtaskIndex),
    };
    // Present at 0 from the start, so `increase()` and alerts work before the first late record.
    this.lateDropped.inc(0, this.lateLabels);
  }

  processElement(value: IN, context: KeyedProcessContext<K>, out: Collector<OUT>): void {
    const timers = context.timerService();
    const timestamp = this.eventTime ? context.timestamp() : timers.currentProcessingTime();
    if (timestamp === undefined) {
      throw new ConfigurationError(
        "watermarkStrategy",
        `${this.assigner.toString()} got a record without an event time: give the source a watermark ` +
          "strategy with a timestamp assigner, or use a processing-time window",
      );
    }
    const watermark = this.eventTime ? timers.currentWatermark() : Number.NEGATIVE_INFINITY;
    let accepted = false;
    for (const window of this.assigner.assignWindows(timestamp)) {
      const maxTimestamp = window.end - 1;
      if (this.eventTime && maxTimestamp + this.allowedLateness <= watermark) continue;
      accepted = true;
      const entry = this.contents.get(window.start);
      const acc = entry === undefined ? this.logic.first(value) : this.logic.add(value, entry.acc);
      this.contents.put(window.start, { end: window.end, acc });
      // Within the allowed lateness the window has fired already: fire again with the update.
      if (this.eventTime && maxTimestamp <= watermark) this.emit(context.getCurrentKey(), window, acc, out);
      // A window's timers are registered with its first record: they are state as much as the
      // entry is, so they exist exactly as long as it does (also after a restore).
      if (entry !== undefined) continue;
      if (!this.eventTime) timers.registerProcessingTimeTimer(maxTimestamp);
      else if (maxTimestamp > watermark) timers.registerEventTimeTimer(maxTimestamp);
      if (this.allowedLateness > 0) timers.registerEventTimeTimer(maxTimestamp + this.allowedLateness);
    }
    if (!accepted) {
      this.lateDropped.inc(1, this.lateLabels);
      this.options.onLateRecord?.(value, timestamp);
    }
  }

  onTimer(time: number, context: OnTimerContext<K>, out: Collector<OUT>): void {
    if ((context.timeDomain() === "event-time") !== this.eventTime) return;
    // Windows of one assigner have distinct ends, so each timer fires at most one of them; the
    // timer order is the output order.
    for (const [start, { end, acc }] of this.contents.entries()) {
      const maxTimestamp = end - 1;
      if (maxTimestamp === time) this.emit(context.getCurrentKey(), new TimeWindow(start, end), acc, out);
      if (maxTimestamp + this.allowedLateness === time) this.contents.remove(start);
    }
  }

  private emit(key: K, window: TimeWindow, acc: ACC, out: Collector<OUT>): void {
    const result = this.logic.result(acc);
    const output =
      this.windowFn === undefined ? (result as unknown as OUT) : this.windowFn(key, window, result);
    out.collect(output, window.end - 1);
  }
}

function checkWindowArguments<IN>(assigner: WindowAssigner, options: WindowOptions<IN>): void {
  if (
    typeof assigner?.assignWindows !== "function" ||
    typeof (assigner as Partial<WindowAssigner>).isEventTime !== "function"
  ) {
    throw new ConfigurationError(
      "window.assigner",
      "must be a window assigner such as TumblingEventTimeWindows.of(60_000)",
    );
  }
  const { allowedLateness } = options;
  if (allowedLateness !== undefined && !(Number.isSafeInteger(allowedLateness) && allowedLateness >= 0)) {
    throw new ConfigurationError(
      "window.allowedLateness",
      `must be a whole number of milliseconds ≥ 0, got ${allowedLateness}`,
    );
  }
}

/**
 * The keyed function behind `keyedStream.window(assigner).reduce(reduce, windowFn?)`: reduces the
 * records of each key and window incrementally, and emits one result per window when it ends (at the
 * watermark for event time, on the clock for processing time), with the timestamp
 * `window.maxTimestamp()`. State is one entry per open window in keyed map state, and the timers
 * are the runtime's, so both survive a restore.
 *
 * @example
 * ```ts
 * const sumPerMinute = createWindowReduceFunction<string, number>(
 *   TumblingEventTimeWindows.of(60_000),
 *   (a, b) => a + b,
 * );
 * keyed.process(sumPerMinute);
 * ```
 */
export function createWindowReduceFunction<K, IN>(
  assigner: WindowAssigner,
  reduce: ReduceFunction<IN>,
  windowFn?: undefined,
  options?: WindowOptions<IN>,
): KeyedProcessFunction<K, IN, IN>;
export function createWindowReduceFunction<K, IN, OUT>(
  assigner: WindowAssigner,
  reduce: ReduceFunction<IN>,
  windowFn: WindowResultFunction<K, IN, OUT>,
  options?: WindowOptions<IN>,
): KeyedProcessFunction<K, IN, OUT>;
export function createWindowReduceFunction<K, IN, OUT>(
  assigner: WindowAssigner,
  reduce: ReduceFunction<IN>,
  windowFn?: WindowResultFunction<K, IN, OUT>,
  options: WindowOptions<IN> = {},
): KeyedProcessFunction<K, IN, OUT> {
  checkWindowArguments(assigner, options);
  if (typeof reduce !== "function") {
    throw new ConfigurationError("window.reduce", "must be a function (accumulated, value) => value");
  }
  const logic: WindowLogic<IN, IN, IN> = {
    first: (value) => value,
    add: (value, accumulated) => reduce(accumulated, value),
    result: (accumulated) => accumulated,
  };
  return new WindowOperatorFunction<K, IN, IN, IN, OUT>(assigner, logic, windowFn, options);
}

/**
 * The keyed function behind `keyedStream.window(assigner).aggregate(aggregate, windowFn?)`: folds the
 * records of each key and window into an accumulator and emits `getResult` (or `windowFn` of it) once
 * per window when it ends, with the timestamp `window.maxTimestamp()`. The accumulators live in
 * keyed map state and must be plain data.
 *
 * @example
 * ```ts
 * const clicksPerMinute = createWindowAggregateFunction(
 *   TumblingEventTimeWindows.of(60_000),
 *   countAggregate<Click>(),
 *   (user: string, window, count) => ({ user, windowStart: window.start, count }),
 * );
 * keyed.process(clicksPerMinute);
 * ```
 */
export function createWindowAggregateFunction<K, IN, ACC, R>(
  assigner: WindowAssigner,
  aggregate: AggregateFunction<IN, ACC, R>,
  windowFn?: undefined,
  options?: WindowOptions<IN>,
): KeyedProcessFunction<K, IN, R>;
export function createWindowAggregateFunction<K, IN, ACC, R, OUT>(
  assigner: WindowAssigner,
  aggregate: AggregateFunction<IN, ACC, R>,
  windowFn: WindowResultFunction<K, R, OUT>,
  options?: WindowOptions<IN>,
): KeyedProcessFunction<K, IN, OUT>;
export function createWindowAggregateFunction<K, IN, ACC, R, OUT>(
  assigner: WindowAssigner,
  aggregate: AggregateFunction<IN, ACC, R>,
  windowFn?: WindowResultFunction<K, R, OUT>,
  options: WindowOptions<IN> = {},
): KeyedProcessFunction<K, IN, OUT> {
  checkWindowArguments(assigner, options);
  if (
    typeof aggregate?.createAccumulator !== "function" ||
    typeof aggregate.add !== "function" ||
    typeof aggregate.getResult !== "function"
  ) {
    throw new ConfigurationError(
      "window.aggregate",
      "must have createAccumulator(), add(value, accumulator) and getResult(accumulator)",
    );
  }
  const logic: WindowLogic<IN, ACC, R> = {
    first: (value) => aggregate.add(value, aggregate.createAccumulator()),
    add: (value, accumulator) => aggregate.add(value, accumulator),
    result: (accumulator) => aggregate.getResult(accumulator),
  };
  return new WindowOperatorFunction<K, IN, ACC, R, OUT>(assigner, logic, windowFn, options);
}
