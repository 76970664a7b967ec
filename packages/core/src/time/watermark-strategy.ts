import { ConfigurationError } from "../errors/onceflow-error.js";

/**
 * Gives a record its event time (ms). `sourceTimestamp` is the time the source attached to it (for
 * example the Kafka record timestamp), when it has one.
 *
 * @example
 * ```ts
 * const assigner: TimestampAssigner<Order> = (order) => Date.parse(order.createdAt);
 * ```
 */
export type TimestampAssigner<T> = (record: T, sourceTimestamp: number | undefined) => number;

/**
 * How a source's records get event times and how watermarks follow them — Flink's
 * `WatermarkStrategy`, as a plain options object. Build one with the {@link WatermarkStrategy}
 * helpers or write the object yourself.
 *
 * - `timestampAssigner`: the event time of a record (default: the source's timestamp).
 * - `maxOutOfOrderness`: how late (ms) a record may be behind the newest one seen (default 0).
 *   The watermark is `maxTimestamp − maxOutOfOrderness − 1`, as in Flink's
 *   `BoundedOutOfOrdernessWatermarks`.
 * - `idleness`: a split with no records for this long (ms) stops holding the watermark back until
 *   it has records again (default: never idle).
 *
 * @example
 * ```ts
 * const strategy: WatermarkStrategy<Click> = { timestampAssigner: (click) => click.at, maxOutOfOrderness: 5000 };
 * ```
 */
export interface WatermarkStrategy<T> {
  readonly timestampAssigner?: TimestampAssigner<T>;
  readonly maxOutOfOrderness?: number;
  readonly idleness?: number;
}

/**
 * A {@link WatermarkStrategy} with builder methods; each returns a new strategy.
 *
 * @example
 * ```ts
 * const strategy = WatermarkStrategy.forBoundedOutOfOrderness<Click>(5000)
 *   .withTimestampAssigner((click) => click.at)
 *   .withIdleness(60_000);
 * ```
 */
export class WatermarkStrategyBuilder<T> implements WatermarkStrategy<T> {
  readonly timestampAssigner?: TimestampAssigner<T>;
  readonly maxOutOfOrderness?: number;
  readonly idleness?: number;

  constructor(strategy: WatermarkStrategy<T> = {}) {
    if (strategy.timestampAssigner !== undefined) this.timestampAssigner = strategy.timestampAssigner;
    if (strategy.maxOutOfOrderness !== undefined) this.maxOutOfOrderness = strategy.maxOutOfOrderness;
    if (strategy.idleness !== undefined) this.idleness = strategy.idleness;
    resolveWatermarkStrategy(this);
  }

  /**
   * Sets how a record's event time is found.
   *
   * @example
   * ```ts
   * WatermarkStrategy.forMonotonousTimestamps<Click>().withTimestampAssigner((click) => click.at);
   * ```
   */
  withTimestampAssigner<U extends T = T>(
    timestampAssigner: TimestampAssigner<U>,
  ): WatermarkStrategyBuilder<U> {
    return new WatermarkStrategyBuilder<U>({ ...this.toOptions(), timestampAssigner });
  }

  /**
   * Marks a split idle after `idleness` ms without records, so it does not hold the watermark back.
   *
   * @example
   * ```ts
   * WatermarkStrategy.forBoundedOutOfOrderness<Click>(1000).withIdleness(30_000);
   * ```
   */
  withIdleness(idleness: number): WatermarkStrategyBuilder<T> {
    return new WatermarkStrategyBuilder<T>({ ...this.toOptions(), idleness });
  }

  private toOptions(): WatermarkStrategy<T> {
    return {
      ...(this.timestampAssigner === undefined ? {} : { timestampAssigner: this.timestampAssigner }),
      ...(this.maxOutOfOrderness === undefined ? {} : { maxOutOfOrderness: this.maxOutOfOrderness }),
      ...(this.idleness === undefined ? {} : { idleness: this.idleness }),
    };
  }
}

/**
 * Flink's `WatermarkStrategy` constructors.
 *
 * @example
 * ```ts
 * job.fromSource(source, { watermarks: WatermarkStrategy.forBoundedOutOfOrderness<Order>(2000) });
 * ```
 */
export const WatermarkStrategy = {
  /**
   * Records may arrive up to `maxOutOfOrderness` ms later than the newest one seen.
   *
   * @example
   * ```ts
   * WatermarkStrategy.forBoundedOutOfOrderness<Click>(5000).withTimestampAssigner((c) => c.at);
   * ```
   */
  forBoundedOutOfOrderness<T>(maxOutOfOrderness: number): WatermarkStrategyBuilder<T> {
    return new WatermarkStrategyBuilder<T>({ maxOutOfOrderness });
  },
  /**
   * Timestamps only go up (out-of-orderness 0).
   *
   * @example
   * ```ts
   * WatermarkStrategy.forMonotonousTimestamps<Tick>().withTimestampAssigner((t) => t.time);
   * ```
   */
  forMonotonousTimestamps<T>(): WatermarkStrategyBuilder<T> {
    return new WatermarkStrategyBuilder<T>({ maxOutOfOrderness: 0 });
  },
} as const;

/**
 * A {@link WatermarkStrategy} checked and with its defaults filled in.
 *
 * @example
 * ```ts
 * const { maxOutOfOrderness } = resolveWatermarkStrategy({}); // 0
 * ```
 */
export interface ResolvedWatermarkStrategy<T> {
  readonly timestampAssigner: TimestampAssigner<T> | undefined;
  readonly maxOutOfOrderness: number;
  readonly idleness: number | undefined;
}

/**
 * Checks a strategy and fills in its defaults; throws a `ConfigurationError` naming the bad setting.
 *
 * @example
 * ```ts
 * resolveWatermarkStrategy({ maxOutOfOrderness: -1 }); // throws ConfigurationError("watermarkStrategy.maxOutOfOrderness", …)
 * ```
 */
export function resolveWatermarkStrategy<T>(strategy: WatermarkStrategy<T>): ResolvedWatermarkStrategy<T> {
  const { timestampAssigner, maxOutOfOrderness = 0, idleness } = strategy;
  if (timestampAssigner !== undefined && typeof timestampAssigner !== "function") {
    throw new ConfigurationError(
      "watermarkStrategy.timestampAssigner",
      "must be a function (record, sourceTimestamp) => number",
    );
  }
  if (!(Number.isFinite(maxOutOfOrderness) && maxOutOfOrderness >= 0)) {
    throw new ConfigurationError(
      "watermarkStrategy.maxOutOfOrderness",
      `must be a number of milliseconds ≥ 0, got ${maxOutOfOrderness}`,
    );
  }
  if (idleness !== undefined && !(Number.isFinite(idleness) && idleness > 0)) {
    throw new ConfigurationError(
      "watermarkStrategy.idleness",
      `must be a number of milliseconds > 0, or left out to never mark a split idle; got ${idleness}`,
    );
  }
  return { timestampAssigner, maxOutOfOrderness, idleness };
}

/**
 * The checkpointed part of a {@link WatermarkGenerator}: the highest timestamp seen (`null` before
 * the first), JSON-safe.
 *
 * @example
 * ```ts
 * const snapshot: WatermarkGeneratorSnapshot = { maxTimestamp: 1_700_000_000_000 };
 * ```
 */
export interface WatermarkGeneratorSnapshot {
  readonly maxTimestamp: number | null;
}

/**
 * The watermark of one split — Flink's `BoundedOutOfOrdernessWatermarks` with
 * `WatermarksWithIdleness`. Pure: the caller passes the clock. Call `onEvent` for each record's
 * timestamp and `markActivity(now)` whenever the split delivered records (once per batch is
 * enough); pass the split's start time to the constructor so that a split that never delivers
 * anything can become idle too.
 *
 * @example
 * ```ts
 * const generator = new WatermarkGenerator({ maxOutOfOrderness: 100, idleness: 30_000 }, Date.now());
 * generator.onEvent(1000);
 * generator.currentWatermark(); // 899
 * generator.isIdle(Date.now() + 60_000); // true
 * ```
 */
export class WatermarkGenerator {
  private readonly maxOutOfOrderness: number;
  private readonly idleness: number | undefined;
  private maxTimestamp = Number.NEGATIVE_INFINITY;
  private lastActivity: number | undefined;

  /**
   * @param startedAt - when the split started (ms); counts as its first activity for idleness.
   */
  constructor(options: { maxOutOfOrderness?: number; idleness?: number } = {}, startedAt?: number) {
    const resolved = resolveWatermarkStrategy(options);
    this.maxOutOfOrderness = resolved.maxOutOfOrderness;
    this.idleness = resolved.idleness;
    this.lastActivity = startedAt;
  }

  /** Takes in the timestamp of one record. */
  onEvent(timestamp: number): void {
    if (timestamp > this.maxTimestamp) this.maxTimestamp = timestamp;
  }

  /** `maxTimestamp − maxOutOfOrderness − 1`, or `-Infinity` before the first record. Never decreases. */
  currentWatermark(): number {
    return this.maxTimestamp - this.maxOutOfOrderness - 1;
  }

  /** The split delivered records at `now`: it is active again. */
  markActivity(now: number): void {
    this.lastActivity = now;
  }

  /** True when idleness is set and the split has had no activity for that long. */
  isIdle(now: number): boolean {
    if (this.idleness === undefined || this.lastActivity === undefined) return false;
    return now - this.lastActivity >= this.idleness;
  }

  /** The state to checkpoint with the split. */
  snapshot(): WatermarkGeneratorSnapshot {
    return { maxTimestamp: this.maxTimestamp === Number.NEGATIVE_INFINITY ? null : this.maxTimestamp };
  }

  /** Takes back a checkpointed state; the watermark continues from there. */
  restore(snapshot: WatermarkGeneratorSnapshot): void {
    this.maxTimestamp = snapshot.maxTimestamp ?? Number.NEGATIVE_INFINITY;
  }
}

/**
 * The checkpointed part of a {@link CombinedWatermark}: the last watermark it gave (`null` before
 * the first; `Infinity` once every split finished, so store it with the default serializer).
 *
 * @example
 * ```ts
 * const snapshot: CombinedWatermarkSnapshot = { watermark: 1_700_000_000_000 };
 * ```
 */
export interface CombinedWatermarkSnapshot {
  readonly watermark: number | null;
}

interface SplitWatermark {
  watermark: number;
  idle: boolean;
}

/**
 * The watermark of a subtask from the watermarks of its splits — Flink's watermark alignment
 * across source splits: the minimum over the splits that are not idle. A finished split counts as
 * `+Infinity`, so when every split has finished the watermark is `+Infinity` and every event-time
 * timer fires. When every split is idle the watermark does not move. It never goes back.
 *
 * @example
 * ```ts
 * const combined = new CombinedWatermark();
 * combined.setSplit("orders-0", 100, false);
 * combined.setSplit("orders-1", 50, false);
 * combined.update(); // true
 * combined.currentWatermark(); // 50
 * ```
 */
export class CombinedWatermark {
  private readonly splits = new Map<string, SplitWatermark>();
  private watermark: number;

  /** @param snapshot - a checkpointed state to continue from. */
  constructor(snapshot?: CombinedWatermarkSnapshot) {
    this.watermark = snapshot?.watermark ?? Number.NEGATIVE_INFINITY;
  }

  /** Reports a split's current watermark and whether it is idle. */
  setSplit(splitId: string, watermark: number, idle: boolean): void {
    const entry = this.splits.get(splitId);
    if (entry === undefined) this.splits.set(splitId, { watermark, idle });
    else {
      entry.watermark = watermark;
      entry.idle = idle;
    }
  }

  /** The split has no more records: it no longer holds the watermark back. */
  markSplitFinished(splitId: string): void {
    this.setSplit(splitId, Number.POSITIVE_INFINITY, false);
  }

  /** Forgets a split (for example one taken away from this subtask). */
  removeSplit(splitId: string): void {
    this.splits.delete(splitId);
  }

  /** Recomputes the combined watermark; true when it advanced. */
  update(): boolean {
    let minimum = Number.POSITIVE_INFINITY;
    let active = 0;
    for (const split of this.splits.values()) {
      if (split.idle) continue;
      active++;
      if (split.watermark < minimum) minimum = split.watermark;
    }
    if (active === 0 || minimum <= this.watermark) return false;
    this.watermark = minimum;
    return true;
  }

  /** The subtask's watermark (`-Infinity` before the first). */
  currentWatermark(): number {
    return this.watermark;
  }

  /** The state to checkpoint, so that a restore does not move the watermark back. */
  snapshot(): CombinedWatermarkSnapshot {
    return { watermark: this.watermark === Number.NEGATIVE_INFINITY ? null : this.watermark };
  }
}
