import { ConfigurationError } from "../errors/onceflow-error.js";
import { getWindowStartWithOffset, TimeWindow } from "./time-window.js";

/**
 * Decides which windows a record belongs to — Flink's `WindowAssigner`. Event-time assigners get
 * the record's timestamp; processing-time assigners get the current processing time.
 *
 * @example
 * ```ts
 * const assigner: WindowAssigner = TumblingEventTimeWindows.of(60_000);
 * assigner.assignWindows(125_000); // [TimeWindow{start=120000, end=180000}]
 * ```
 */
export interface WindowAssigner {
  /** The windows that contain `timestamp`, in no particular order. */
  assignWindows(timestamp: number): TimeWindow[];
  /** True for event time (windows fire on the watermark), false for processing time. */
  isEventTime(): boolean;
  /** Shown in logs and errors, for example `TumblingEventTimeWindows(60000)`. */
  toString(): string;
}

function checkSize(setting: string, size: number): void {
  if (!(Number.isSafeInteger(size) && size > 0)) {
    throw new ConfigurationError(setting, `must be a whole number of milliseconds > 0, got ${size}`);
  }
}

function checkOffset(setting: string, offset: number, period: number, periodName: string): void {
  if (!(Number.isSafeInteger(offset) && Math.abs(offset) < period)) {
    throw new ConfigurationError(
      setting,
      `must be a whole number of milliseconds with |offset| < ${periodName} (${period}), got ${offset}`,
    );
  }
}

abstract class TumblingWindows implements WindowAssigner {
  readonly size: number;
  readonly offset: number;

  protected constructor(size: number, offset: number) {
    checkSize("window.size", size);
    checkOffset("window.offset", offset, size, "size");
    this.size = size;
    this.offset = offset;
  }

  assignWindows(timestamp: number): TimeWindow[] {
    const start = getWindowStartWithOffset(timestamp, this.offset, this.size);
    return [new TimeWindow(start, start + this.size)];
  }

  abstract isEventTime(): boolean;
}

abstract class SlidingWindows implements WindowAssigner {
  readonly size: number;
  readonly slide: number;
  readonly offset: number;

  protected constructor(size: number, slide: number, offset: number) {
    checkSize("window.size", size);
    checkSize("window.slide", slide);
    checkOffset("window.offset", offset, slide, "slide");
    this.size = size;
    this.slide = slide;
    this.offset = offset;
  }

  assignWindows(timestamp: number): TimeWindow[] {
    const windows: TimeWindow[] = [];
    const lastStart = getWindowStartWithOffset(timestamp, this.offset, this.slide);
    for (let start = lastStart; start > timestamp - this.size; start -= this.slide) {
      windows.push(new TimeWindow(start, start + this.size));
    }
    return windows;
  }

  abstract isEventTime(): boolean;
}

/**
 * Fixed-size, non-overlapping windows by event time — Flink's `TumblingEventTimeWindows`. Windows
 * start at multiples of `size` (since the epoch) plus `offset`; use the offset for time zones,
 * for example `-8 h` for days in UTC+8.
 *
 * @example
 * ```ts
 * keyed.window(TumblingEventTimeWindows.of(60_000)).aggregate(countAggregate);
 * TumblingEventTimeWindows.of(86_400_000, -8 * 3_600_000); // days starting at midnight in UTC+8
 * ```
 */
export class TumblingEventTimeWindows extends TumblingWindows {
  private constructor(size: number, offset: number) {
    super(size, offset);
  }

  /**
   * Windows of `size` ms, shifted by `offset` ms (`|offset| < size`, default 0).
   *
   * @example
   * ```ts
   * TumblingEventTimeWindows.of(60_000, 15_000); // [..., 15s–75s), [75s–135s) ...
   * ```
   */
  static of(size: number, offset = 0): TumblingEventTimeWindows {
    return new TumblingEventTimeWindows(size, offset);
  }

  isEventTime(): boolean {
    return true;
  }

  override toString(): string {
    return `TumblingEventTimeWindows(${this.size}${this.offset === 0 ? "" : `, ${this.offset}`})`;
  }
}

/**
 * Fixed-size, non-overlapping windows by the clock of the subtask — Flink's
 * `TumblingProcessingTimeWindows`. Results are not reproducible after a restore: use event time
 * when they must be.
 *
 * @example
 * ```ts
 * keyed.window(TumblingProcessingTimeWindows.of(10_000)).reduce((a, b) => a + b);
 * ```
 */
export class TumblingProcessingTimeWindows extends TumblingWindows {
  private constructor(size: number, offset: number) {
    super(size, offset);
  }

  /**
   * Windows of `size` ms, shifted by `offset` ms (`|offset| < size`, default 0).
   *
   * @example
   * ```ts
   * TumblingProcessingTimeWindows.of(10_000);
   * ```
   */
  static of(size: number, offset = 0): TumblingProcessingTimeWindows {
    return new TumblingProcessingTimeWindows(size, offset);
  }

  isEventTime(): boolean {
    return false;
  }

  override toString(): string {
    return `TumblingProcessingTimeWindows(${this.size}${this.offset === 0 ? "" : `, ${this.offset}`})`;
  }
}

/**
 * Windows of `size` ms starting every `slide` ms, by event time — Flink's
 * `SlidingEventTimeWindows`. A record belongs to about `size / slide` windows.
 *
 * @example
 * ```ts
 * keyed.window(SlidingEventTimeWindows.of(60_000, 10_000)).aggregate(countAggregate); // last minute, every 10 s
 * ```
 */
export class SlidingEventTimeWindows extends SlidingWindows {
  private constructor(size: number, slide: number, offset: number) {
    super(size, slide, offset);
  }

  /**
   * Windows of `size` ms every `slide` ms, shifted by `offset` ms (`|offset| < slide`, default 0).
   *
   * @example
   * ```ts
   * SlidingEventTimeWindows.of(60_000, 10_000);
   * ```
   */
  static of(size: number, slide: number, offset = 0): SlidingEventTimeWindows {
    return new SlidingEventTimeWindows(size, slide, offset);
  }

  isEventTime(): boolean {
    return true;
  }

  override toString(): string {
    return `SlidingEventTimeWindows(${this.size}, ${this.slide}${this.offset === 0 ? "" : `, ${this.offset}`})`;
  }
}

/**
 * Windows of `size` ms starting every `slide` ms, by the clock of the subtask — Flink's
 * `SlidingProcessingTimeWindows`.
 *
 * @example
 * ```ts
 * keyed.window(SlidingProcessingTimeWindows.of(60_000, 5_000)).reduce((a, b) => Math.max(a, b));
 * ```
 */
export class SlidingProcessingTimeWindows extends SlidingWindows {
  private constructor(size: number, slide: number, offset: number) {
    super(size, slide, offset);
  }

  /**
   * Windows of `size` ms every `slide` ms, shifted by `offset` ms (`|offset| < slide`, default 0).
   *
   * @example
   * ```ts
   * SlidingProcessingTimeWindows.of(60_000, 5_000);
   * ```
   */
  static of(size: number, slide: number, offset = 0): SlidingProcessingTimeWindows {
    return new SlidingProcessingTimeWindows(size, slide, offset);
  }

  isEventTime(): boolean {
    return false;
  }

  override toString(): string {
    return `SlidingProcessingTimeWindows(${this.size}, ${this.slide}${this.offset === 0 ? "" : `, ${this.offset}`})`;
  }
}
