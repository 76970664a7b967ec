import { ConfigurationError } from "../errors/onceflow-error.js";
import { type Gauge, type MetricLabels, MetricNames } from "../observability/metrics.js";
import type {
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SourceSplit,
  SplitEnumeratorContext,
} from "./source.js";

/**
 * One split of a {@link GeneratorSource}: split `splitIndex` of `splits` produces the indices
 * `splitIndex, splitIndex + splits, splitIndex + 2·splits, …`; `nextIndex` is the next one it will
 * produce, which is its whole position.
 *
 * @example
 * ```ts
 * const split: GeneratorSplit = { splitId: "generator-3", splitIndex: 3, splits: 4, nextIndex: 3 };
 * ```
 */
export interface GeneratorSplit extends SourceSplit {
  readonly splitIndex: number;
  readonly splits: number;
  readonly nextIndex: number;
}

/**
 * Options of a {@link GeneratorSource}.
 *
 * @example
 * ```ts
 * const options: GeneratorSourceOptions<number> = { count: 1000, generate: (i) => i * 2 };
 * ```
 */
export interface GeneratorSourceOptions<T> {
  /** Builds record `index`. Must be deterministic: a restore produces the same indices again. */
  generate(index: number, splitIndex: number): T;
  /** How many records in total (indices `0 … count − 1`). Leave out for an unbounded source. */
  readonly count?: number;
  /** Into how many splits the indices are divided (default 1). Splits are the unit of parallelism. */
  readonly splits?: number;
  /** Rate limit over the whole source, shared among the splits by how many each subtask reads. */
  readonly recordsPerSecond?: number;
  /** The event time of record `index`; fills {@link SourceBatch.timestamps} when given. */
  timestampOf?(index: number): number;
  /** Most records per batch (default 1024). */
  readonly batchSize?: number;
  /** Shown in logs (default "generator"). */
  readonly name?: string;
}

const DEFAULT_BATCH_SIZE = 1024;
// A rate-limited reader may burst at most this share of a second's worth of records.
const BURST_SECONDS = 0.1;

/**
 * A deterministic source of generated records — Flink's `DataGeneratorSource`. Bounded when
 * `count` is given, unbounded otherwise. Split `k` of `splits` produces the indices
 * `k, k + splits, k + 2·splits, …` below `count`; a checkpoint stores each split's next index, so a
 * restored job continues exactly where the checkpoint was. Split `k` goes to subtask
 * `k % parallelism`.
 *
 * @example
 * ```ts
 * const source = new GeneratorSource({
 *   count: 1_000_000,
 *   splits: 4,
 *   generate: (index) => ({ user: `u${index % 100}`, amount: index % 7 }),
 *   timestampOf: (index) => 1_700_000_000_000 + index,
 * });
 * job.fromSource(source);
 * ```
 */
export class GeneratorSource<T> implements Source<T, GeneratorSplit> {
  readonly name: string;
  readonly boundedness: "bounded" | "continuous";
  private readonly options: GeneratorSourceOptions<T>;
  private readonly splitCount: number;

  constructor(options: GeneratorSourceOptions<T>) {
    validateGeneratorOptions(options);
    this.options = options;
    this.name = options.name ?? "generator";
    this.boundedness = options.count === undefined ? "continuous" : "bounded";
    this.splitCount = options.splits ?? 1;
  }

  /**
   * Lists every split at its start.
   *
   * @example
   * ```ts
   * await new GeneratorSource({ count: 10, splits: 2, generate: (i) => i }).discoverSplits(context);
   * // [{ splitId: "generator-0", splitIndex: 0, splits: 2, nextIndex: 0 }, { … splitIndex: 1, nextIndex: 1 }]
   * ```
   */
  async discoverSplits(_context?: SplitEnumeratorContext): Promise<GeneratorSplit[]> {
    const splits: GeneratorSplit[] = [];
    for (let k = 0; k < this.splitCount; k++) {
      splits.push({ splitId: `generator-${k}`, splitIndex: k, splits: this.splitCount, nextIndex: k });
    }
    return splits;
  }

  /**
   * Split `k` goes to subtask `k % parallelism`, which spreads splits evenly.
   *
   * @example
   * ```ts
   * source.assignSplit({ splitId: "generator-5", splitIndex: 5, splits: 8, nextIndex: 5 }, 4); // 1
   * ```
   */
  assignSplit(split: GeneratorSplit, parallelism: number): number {
    return split.splitIndex % parallelism;
  }

  /**
   * Creates the reader of one subtask.
   *
   * @example
   * ```ts
   * const reader = source.createReader(readerContext);
   * ```
   */
  createReader(context?: SourceReaderContext): GeneratorSourceReader<T> {
    return new GeneratorSourceReader(this.options, undefined, context);
  }
}

function validateGeneratorOptions<T>(options: GeneratorSourceOptions<T>): void {
  if (typeof options.generate !== "function") {
    throw new ConfigurationError("generator.generate", "must be a function (index, splitIndex) => record");
  }
  const { count, splits, batchSize, recordsPerSecond } = options;
  if (count !== undefined && !(Number.isSafeInteger(count) && count >= 0)) {
    throw new ConfigurationError(
      "generator.count",
      `must be a whole number ≥ 0, or left out for an unbounded source; got ${count}`,
    );
  }
  if (splits !== undefined && !(Number.isSafeInteger(splits) && splits >= 1)) {
    throw new ConfigurationError("generator.splits", `must be a whole number ≥ 1, got ${splits}`);
  }
  if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize >= 1)) {
    throw new ConfigurationError("generator.batchSize", `must be a whole number ≥ 1, got ${batchSize}`);
  }
  if (recordsPerSecond !== undefined && !(Number.isFinite(recordsPerSecond) && recordsPerSecond > 0)) {
    throw new ConfigurationError(
      "generator.recordsPerSecond",
      `must be a number > 0, or left out for no limit; got ${recordsPerSecond}`,
    );
  }
}

interface MutableSplit {
  readonly splitId: string;
  readonly splitIndex: number;
  readonly splits: number;
  nextIndex: number;
}

const resolved: Promise<void> = Promise.resolve();

/**
 * Reads the splits of a {@link GeneratorSource} assigned to one subtask. Each `pollNext` returns
 * one batch from one split, taking the splits in turn. With `recordsPerSecond`, a token bucket
 * holds records back and `isAvailable` resolves when the next token is due.
 *
 * @example
 * ```ts
 * const reader = new GeneratorSourceReader({ count: 4, generate: (i) => i });
 * reader.addSplits(await new GeneratorSource({ count: 4, generate: (i) => i }).discoverSplits());
 * reader.pollNext(); // { splitId: "generator-0", records: [0, 1, 2, 3] }
 * ```
 */
export class GeneratorSourceReader<T> implements SourceReader<T, GeneratorSplit> {
  private readonly generate: (index: number, splitIndex: number) => T;
  private readonly timestampOf: ((index: number) => number) | undefined;
  private readonly count: number;
  private readonly batchSize: number;
  private readonly recordsPerSecond: number | undefined;
  private readonly now: () => number;
  private splits: MutableSplit[] = [];
  private cursor = 0;
  private closed = false;
  // Token bucket, only used with recordsPerSecond.
  private rate = 0;
  private capacity = 0;
  private tokens = 0;
  private refilledAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private waiting: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** `onceflow_source_lag_records` per split, when `count` is given (the records left are known). */
  private readonly lag: { gauge: Gauge; labels: Map<string, MetricLabels>; base: MetricLabels } | undefined;

  /**
   * @param now - the clock in milliseconds, replaceable in tests (default `performance.now`).
   * @param context - the reader's context: with it and a `count`, each split's records left are
   *   reported as `onceflow_source_lag_records`.
   */
  constructor(
    options: GeneratorSourceOptions<T>,
    now: () => number = () => performance.now(),
    context?: SourceReaderContext,
  ) {
    validateGeneratorOptions(options);
    this.generate = options.generate;
    this.timestampOf = options.timestampOf;
    this.count = options.count ?? Number.POSITIVE_INFINITY;
    this.batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    this.recordsPerSecond = options.recordsPerSecond;
    this.now = now;
    this.lag =
      context === undefined || options.count === undefined
        ? undefined
        : {
            gauge: context.metrics.gauge(
              MetricNames.sourceLagRecords,
              "Records of a source split not read yet: its end minus the source's position",
            ),
            labels: new Map(),
            base: { job: context.jobId, subtask: String(context.subtaskIndex), source: context.operatorUid },
          };
  }

  addSplits(splits: GeneratorSplit[]): void {
    for (const split of splits) {
      this.splits.push({
        splitId: split.splitId,
        splitIndex: split.splitIndex,
        splits: split.splits,
        nextIndex: split.nextIndex,
      });
    }
    for (const split of this.splits) this.reportLag(split);
    if (this.recordsPerSecond !== undefined && splits.length > 0) {
      // This reader's share of the source-wide rate: its splits out of all of them.
      const total = this.splits[0]?.splits ?? 1;
      this.rate = (this.recordsPerSecond * this.splits.length) / total;
      this.capacity = Math.max(1, Math.min(this.batchSize, Math.floor(this.rate * BURST_SECONDS)));
      if (this.refilledAt === 0) {
        this.refilledAt = this.now();
        this.tokens = 1;
      }
    }
    this.signal();
  }

  pollNext(): SourceBatch<T> | undefined {
    let limit = this.batchSize;
    if (this.recordsPerSecond !== undefined) {
      this.refill();
      limit = Math.min(limit, Math.floor(this.tokens));
      if (limit <= 0) return undefined;
    }
    const split = this.nextSplit();
    if (split === undefined) return undefined;
    const stride = split.splits;
    const remaining = Math.ceil((this.count - split.nextIndex) / stride);
    const size = Math.min(remaining, limit);
    if (this.recordsPerSecond !== undefined) this.tokens -= size;
    const records = new Array<T>(size);
    const generate = this.generate;
    const splitIndex = split.splitIndex;
    let index = split.nextIndex;
    const timestampOf = this.timestampOf;
    if (timestampOf === undefined) {
      for (let i = 0; i < size; i++, index += stride) records[i] = generate(index, splitIndex);
      split.nextIndex = index;
      this.reportLag(split);
      return { splitId: split.splitId, records };
    }
    const timestamps = new Array<number>(size);
    for (let i = 0; i < size; i++, index += stride) {
      records[i] = generate(index, splitIndex);
      timestamps[i] = timestampOf(index);
    }
    split.nextIndex = index;
    this.reportLag(split);
    return { splitId: split.splitId, records, timestamps };
  }

  private reportLag(split: MutableSplit): void {
    const lag = this.lag;
    if (lag === undefined) return;
    let labels = lag.labels.get(split.splitId);
    if (labels === undefined) {
      labels = { ...lag.base, split: split.splitId };
      lag.labels.set(split.splitId, labels);
    }
    lag.gauge.set(Math.max(0, Math.ceil((this.count - split.nextIndex) / split.splits)), labels);
  }

  isAvailable(): Promise<void> {
    if (this.closed || this.isFinished()) return resolved;
    if (this.splits.length === 0) return this.waitForSignal();
    if (this.recordsPerSecond === undefined) return resolved;
    this.refill();
    if (this.tokens >= 1) return resolved;
    const waiting = this.waitForSignal();
    if (this.timer === undefined) this.wakeWhenTokenDue();
    return waiting;
  }

  isFinished(): boolean {
    if (this.count === Number.POSITIVE_INFINITY) return false;
    for (const split of this.splits) if (split.nextIndex < this.count) return false;
    return true;
  }

  snapshotState(_checkpointId?: number): GeneratorSplit[] {
    return this.splits.map((split) => ({
      splitId: split.splitId,
      splitIndex: split.splitIndex,
      splits: split.splits,
      nextIndex: split.nextIndex,
    }));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.signal();
  }

  /** The next unfinished split after the cursor, taking splits in turn. */
  private nextSplit(): MutableSplit | undefined {
    const n = this.splits.length;
    for (let tried = 0; tried < n; tried++) {
      const split = this.splits[this.cursor];
      this.cursor = this.cursor + 1 >= n ? 0 : this.cursor + 1;
      if (split !== undefined && split.nextIndex < this.count) return split;
    }
    return undefined;
  }

  /** Signals once a whole token is there. Timers may fire a little early: then it waits on. */
  private wakeWhenTokenDue(): void {
    const delay = Math.max(1, Math.ceil(((1 - this.tokens) / this.rate) * 1000));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refill();
      if (this.tokens < 1 && !this.closed) this.wakeWhenTokenDue();
      else this.signal();
    }, delay);
  }

  private refill(): void {
    const now = this.now();
    const elapsed = now - this.refilledAt;
    if (elapsed <= 0) return;
    this.tokens = Math.min(this.capacity, this.tokens + (elapsed * this.rate) / 1000);
    this.refilledAt = now;
  }

  private waitForSignal(): Promise<void> {
    if (this.waiting === undefined) {
      this.waiting = new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    return this.waiting;
  }

  private signal(): void {
    const wake = this.wake;
    this.waiting = undefined;
    this.wake = undefined;
    wake?.();
  }
}
