import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { TypeSerializer } from "../state/serializer.js";

/**
 * A unit of a source's input that is read by one subtask at a time, such as a Kafka
 * topic-partition or one file. A split carries its own position: the reader returns updated
 * splits from `snapshotState`, and they are what a restore hands back.
 *
 * @example
 * ```ts
 * interface PartitionSplit extends SourceSplit { topic: string; partition: number; nextOffset: string }
 * ```
 */
export interface SourceSplit {
  /** Unique within the source and stable across restarts (`orders-3`). */
  readonly splitId: string;
}

/**
 * What a source sees when it lists its splits.
 *
 * @example
 * ```ts
 * async discoverSplits(context: SplitEnumeratorContext) { context.logger.info("listing partitions"); return []; }
 * ```
 */
export interface SplitEnumeratorContext {
  readonly jobId: string;
  readonly parallelism: number;
  readonly logger: Logger;
}

/**
 * What a reader sees: its subtask, logger and metrics.
 *
 * @example
 * ```ts
 * createReader(context: SourceReaderContext) { return new MyReader(context.subtaskIndex); }
 * ```
 */
export interface SourceReaderContext {
  readonly jobId: string;
  readonly operatorUid: string;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  /** True when the job restored a checkpoint: splits discovered later are new, not initial. */
  readonly isRestored: boolean;
  /** The checkpoint interval in ms, or `undefined` when checkpointing is off. */
  readonly checkpointingInterval: number | undefined;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/**
 * Records read from one split, in order. `timestamps`, when given, are the records' event times
 * (same length as `records`); a watermark strategy may use them.
 *
 * @example
 * ```ts
 * const batch: SourceBatch<string> = { splitId: "orders-0", records: ["a", "b"] };
 * ```
 */
export interface SourceBatch<T> {
  readonly splitId: string;
  readonly records: T[];
  readonly timestamps?: number[];
}

/**
 * Reads the splits assigned to one subtask — Flink's `SourceReader`, pull-based. The runtime calls
 * `pollNext` only from the subtask's own loop, between checkpoint barriers, so the positions that
 * `snapshotState` returns match exactly the records handed out so far. Keep what you prefetch
 * bounded: that is the backpressure.
 *
 * @example
 * ```ts
 * class CounterReader implements SourceReader<number, CounterSplit> {
 *   private splits: CounterSplit[] = [];
 *   addSplits(splits: CounterSplit[]) { this.splits.push(...splits); }
 *   pollNext() { const s = this.splits.find((x) => x.next < x.end); if (!s) return undefined;
 *     return { splitId: s.splitId, records: [s.next++] }; }
 *   isAvailable() { return Promise.resolve(); }
 *   isFinished() { return this.splits.every((s) => s.next >= s.end); }
 *   snapshotState() { return this.splits.map((s) => ({ ...s })); }
 *   async close() {}
 * }
 * ```
 */
export interface SourceReader<T, SplitT extends SourceSplit> {
  /** Called once, after the first `addSplits`. */
  start?(): Promise<void> | void;
  /** Splits to read: restored ones with their positions, or newly discovered ones. */
  addSplits(splits: SplitT[]): Promise<void> | void;
  /** The next batch, or `undefined` when nothing is ready now. */
  pollNext(): SourceBatch<T> | undefined | Promise<SourceBatch<T> | undefined>;
  /** Resolves when `pollNext` may return data, or the reader has finished. */
  isAvailable(): Promise<void>;
  /** True when every assigned split is finished (bounded input read to its end). */
  isFinished(): boolean;
  /** The current position of every assigned split, for checkpoint `checkpointId`. */
  snapshotState(checkpointId: number): SplitT[];
  notifyCheckpointComplete?(checkpointId: number): Promise<void> | void;
  notifyCheckpointAborted?(checkpointId: number): Promise<void> | void;
  close(): Promise<void>;
}

/**
 * A source of records divided into splits — Flink's FLIP-27 `Source`, with the enumerator reduced to
 * a function: every subtask lists the splits, and each split goes to the subtask
 * `assignSplit(split, parallelism)` names (a stable hash of the id by default). Restored splits
 * always win over discovered ones.
 *
 * @example
 * ```ts
 * const numbers: Source<number, CounterSplit> = {
 *   name: "numbers",
 *   boundedness: "bounded",
 *   discoverSplits: async () => [{ splitId: "0", next: 0, end: 100 }],
 *   createReader: () => new CounterReader(),
 * };
 * ```
 */
export interface Source<T, SplitT extends SourceSplit = SourceSplit> {
  readonly name: string;
  readonly boundedness: "bounded" | "continuous";
  /** Lists the splits that exist now, each at its start position. */
  discoverSplits(context: SplitEnumeratorContext): Promise<SplitT[]>;
  /** When set, `discoverSplits` runs again at this interval; splits not seen before are added. */
  readonly splitDiscoveryIntervalMs?: number;
  /** Which subtask reads a split. Must be deterministic. Defaults to a stable hash of `splitId`. */
  assignSplit?(split: SplitT, parallelism: number): number;
  createReader(context: SourceReaderContext): SourceReader<T, SplitT> | Promise<SourceReader<T, SplitT>>;
  /** How splits are stored in checkpoints. Defaults to the structured-clone serializer. */
  readonly splitSerializer?: TypeSerializer<SplitT>;
}
