import {
  type Collector,
  countAggregate,
  type DataStream,
  type KeyedProcessContext,
  type KeyedProcessFunction,
  type KeyedRuntimeContext,
  TumblingEventTimeWindows,
  type ValueState,
} from "../../src/index.js";
import { CheckpointAlignment } from "../../src/runtime/exchange/checkpoint-alignment.js";

// The keyed job of the exploration: every split carries every key, so after `keyBy` each key's
// records come from several splits (and, at parallelism ≥ 2, through the exchange from several
// subtasks). Its output is the results — a running count per key and a count per (key, window) —
// encoded as distinct numbers, so the sinks under test and the exactly-once check stay as they are
// and the check compares with the reference computed from the input.

/** Keys of the keyed job: record `value` has key `value % KEYS`. */
export const KEYS = 5;
/** Event time of a record is its position in its split; windows hold this many positions. */
export const WINDOW_SIZE = 4;

const RUNNING_COUNT = 1_000_000;
const WINDOW_COUNT = 2_000_000;

/** The key of an input record. */
export const keyOf = (value: number): number => value % KEYS;

/** A running count row: key `key` has seen `count` records (including this one). */
export const runningCountRow = (key: number, count: number): number => RUNNING_COUNT + key * 10_000 + count;

/** A window count row: key `key` has `count` records in the window starting at position `start`. */
export const windowCountRow = (key: number, start: number, count: number): number =>
  WINDOW_COUNT + key * 10_000 + (start / WINDOW_SIZE) * 100 + count;

/** Reads a row back as words, for reports. */
export function describeRow(row: number): string {
  const kind = row >= WINDOW_COUNT ? "window" : "running";
  const rest = row - (kind === "window" ? WINDOW_COUNT : RUNNING_COUNT);
  const key = Math.floor(rest / 10_000);
  if (kind === "running") return `running count of k${key} = ${rest % 10_000}`;
  const window = Math.floor((rest % 10_000) / 100);
  return `count of k${key} in window ${window * WINDOW_SIZE}–${(window + 1) * WINDOW_SIZE - 1} = ${rest % 100}`;
}

/**
 * The rows a correct run writes, computed from the input alone: for each key `k` with `n` records,
 * running counts 1 … n; for each (key, window) holding records, one row with their number.
 */
export function keyedReference(splits: number, perSplit: number): number[] {
  const perKey = new Map<number, number>();
  const perWindow = new Map<string, { key: number; start: number; count: number }>();
  for (let value = 0; value < splits * perSplit; value++) {
    const key = keyOf(value);
    perKey.set(key, (perKey.get(key) ?? 0) + 1);
    const start = Math.floor((value % perSplit) / WINDOW_SIZE) * WINDOW_SIZE;
    const window = perWindow.get(`${key}@${start}`) ?? { key, start, count: 0 };
    window.count++;
    perWindow.set(`${key}@${start}`, window);
  }
  const rows: number[] = [];
  for (const [key, count] of perKey)
    for (let each = 1; each <= count; each++) rows.push(runningCountRow(key, each));
  for (const { key, start, count } of perWindow.values()) rows.push(windowCountRow(key, start, count));
  return rows.sort((left, right) => left - right);
}

/**
 * Counts records per key in keyed state; emits each record's running count as a row. It waits for
 * the event loop after each record, as a function calling a service would: other subtask loops —
 * and their barriers — run while a batch is half way through the exchange.
 */
class RunningCountRows implements KeyedProcessFunction<number, number, number> {
  private count!: ValueState<number>;
  constructor(private readonly progress: { keyedRecordsProcessed: number }) {}
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(
    _value: number,
    context: KeyedProcessContext<number>,
    out: Collector<number>,
  ): Promise<void> {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect(runningCountRow(context.getCurrentKey(), count));
    this.progress.keyedRecordsProcessed++;
    return new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/**
 * Builds the keyed job behind `input`: `keyBy(value % KEYS)`, then a running count and a tumbling
 * event-time window count, their rows in one stream (a union) to the sink. `progress` counts the
 * records the running count processed (the model waits on it to send a barrier mid-batch).
 */
export function keyedResults(
  input: DataStream<number>,
  progress: { keyedRecordsProcessed: number },
): DataStream<number> {
  const keyed = input.keyBy(keyOf);
  const running = keyed.process(() => new RunningCountRows(progress), { uid: "running-count" });
  const windows = keyed
    .window(TumblingEventTimeWindows.of(WINDOW_SIZE))
    .aggregate(countAggregate(), (key, window, count) => windowCountRow(key, window.start, count), {
      uid: "window-count",
    });
  return running.union(windows);
}

/** Event time of a record of the {@link ControlledInput}: its position in its split. */
export const positionInSplit =
  (perSplit: number) =>
  (value: number): number =>
    value % perSplit;

/**
 * Plants a bug for the exploration to catch, not part of the product: barrier alignment switched
 * off — each subtask loop snapshots as soon as it takes barrier N, without waiting for the loops that
 * send into its keyed stage. Returns the function that removes it.
 *
 * @example
 * ```ts
 * const unplant = plantUnalignedSnapshots();
 * try { await runScenario(target, scenario); } finally { unplant(); }
 * ```
 */
export function plantUnalignedSnapshots(): () => void {
  const original = CheckpointAlignment.prototype.arrive;
  CheckpointAlignment.prototype.arrive = function (this: CheckpointAlignment, phase, checkpointId) {
    return phase === "aligned" ? Promise.resolve() : original.call(this, phase, checkpointId);
  };
  return () => {
    CheckpointAlignment.prototype.arrive = original;
  };
}
