/**
 * A window of time `[start, end)` in milliseconds — Flink's `TimeWindow`. `end` is exclusive, so
 * the last timestamp that belongs to the window is {@link TimeWindow.maxTimestamp} `= end − 1`.
 *
 * @example
 * ```ts
 * const window = new TimeWindow(0, 60_000);
 * window.maxTimestamp(); // 59_999
 * ```
 */
export class TimeWindow {
  readonly start: number;
  readonly end: number;

  constructor(start: number, end: number) {
    this.start = start;
    this.end = end;
  }

  /** The last timestamp inside the window: `end − 1`. Results carry it as their timestamp. */
  maxTimestamp(): number {
    return this.end - 1;
  }

  /** True when `timestamp` is inside `[start, end)`. */
  contains(timestamp: number): boolean {
    return timestamp >= this.start && timestamp < this.end;
  }

  /** True when both windows cover the same time. */
  equals(other: TimeWindow): boolean {
    return this.start === other.start && this.end === other.end;
  }

  /** True when the windows overlap or touch. */
  intersects(other: TimeWindow): boolean {
    return this.start <= other.end && this.end >= other.start;
  }

  /** `TimeWindow{start=0, end=60000}`, as Flink prints it. */
  toString(): string {
    return `TimeWindow{start=${this.start}, end=${this.end}}`;
  }
}

/**
 * The start of the window that contains `timestamp`, for windows of `windowSize` shifted by
 * `offset` — Flink's `TimeWindow.getWindowStartWithOffset`. Right for negative timestamps too.
 *
 * @example
 * ```ts
 * getWindowStartWithOffset(125, 0, 60); // 120
 * getWindowStartWithOffset(-1, 0, 60); // -60
 * ```
 */
export function getWindowStartWithOffset(timestamp: number, offset: number, windowSize: number): number {
  const remainder = (timestamp - offset) % windowSize;
  // `%` keeps the sign of the dividend: step back one window for timestamps before the offset.
  return remainder < 0 ? timestamp - (remainder + windowSize) : timestamp - remainder;
}
