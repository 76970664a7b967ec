import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { OperatorStateStore } from "../state/state.js";

/**
 * Where a function instance runs: which subtask of how many, in which job.
 *
 * @example
 * ```ts
 * open(context: RuntimeContext) { this.prefix = `${context.jobId}-${context.subtaskIndex}`; }
 * ```
 */
export interface RuntimeContext {
  readonly jobId: string;
  /** The stable id of the operator this function belongs to (set with `uid`, or derived). */
  readonly operatorUid: string;
  /** 0-based index of this subtask. */
  readonly subtaskIndex: number;
  /** How many subtasks the job runs in total (across all processes). */
  readonly parallelism: number;
  /** Incremented every time the job restarts in this process (0 for the first attempt). */
  readonly attemptNumber: number;
  /**
   * The incarnation of this attempt: a number the checkpoint storage hands out, unique for the job
   * across every process and attempt and growing with each (see `CheckpointStorage.claimIncarnation`).
   * A newer incarnation of the same subtasks fences this one. Put it in transaction ids so that no
   * later attempt's transaction can ever be reached through an older handle (0 when checkpointing
   * is off).
   */
  readonly incarnation: number;
  /**
   * The series `incarnation` is numbered in (see `CheckpointStorage.describeIncarnations`): a reset
   * checkpoint storage counts from 1 again in a new series, so a connector that keeps incarnations
   * outside the storage compares them only within a series. Set by the runtime whenever
   * checkpointing is on; absent otherwise (and in contexts built by hand).
   */
  readonly incarnationSeries?: IncarnationSeriesContext;
  /** The checkpoint interval in ms, or `undefined` when checkpointing is off. */
  readonly checkpointingInterval: number | undefined;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/**
 * The incarnation series of an attempt, and the storage's newest incarnation on demand.
 *
 * @example
 * ```ts
 * const series = context.incarnationSeries;
 * if (series !== undefined && leftoverIncarnation > (await series.newestIncarnation())) {
 *   // never handed out in this series: left by the run before a checkpoint storage reset
 * }
 * ```
 */
export interface IncarnationSeriesContext {
  /** The id of the series (made with the storage's incarnation counter). */
  readonly series: string;
  /** Asks the checkpoint storage for the job's newest incarnation now: any number above it is of another series. */
  newestIncarnation(): Promise<number>;
}

/**
 * What `initializeState` receives: whether this start restores a checkpoint, and the operator
 * state store.
 *
 * @example
 * ```ts
 * initializeState(context: FunctionInitializationContext) {
 *   this.pending = context.getOperatorStateStore().getListState<string>({ name: "pending" });
 *   if (context.isRestored()) for (const id of this.pending.get()) replay(id);
 * }
 * ```
 */
export interface FunctionInitializationContext extends RuntimeContext {
  /** True when the state comes from a checkpoint (a restart or a restore). */
  isRestored(): boolean;
  /** The id of the restored checkpoint, or `undefined` on a fresh start. */
  getRestoredCheckpointId(): number | undefined;
  getOperatorStateStore(): OperatorStateStore;
}

/**
 * What `snapshotState` receives: the checkpoint being taken.
 *
 * @example
 * ```ts
 * snapshotState(context: FunctionSnapshotContext) { this.lastCheckpoint = context.checkpointId; }
 * ```
 */
export interface FunctionSnapshotContext {
  readonly checkpointId: number;
  /** Milliseconds since the epoch when the checkpoint was triggered. */
  readonly checkpointTimestamp: number;
  /**
   * The job's last checkpoint (end of input, or a stop): nothing runs after its completion but
   * the notification and `close()`. Absent means `false`.
   */
  readonly isFinal?: boolean;
}

/**
 * A function that keeps operator state across failures — Flink's `CheckpointedFunction`.
 * `initializeState` runs before any record (register state, read it back on restore);
 * `snapshotState` runs when the checkpoint barrier passes the function: bring the registered state
 * up to date there.
 *
 * @example
 * ```ts
 * class Buffering implements CheckpointedFunction {
 *   private state!: ListState<number>;
 *   private buffer: number[] = [];
 *   initializeState(context: FunctionInitializationContext) {
 *     this.state = context.getOperatorStateStore().getListState({ name: "buffer" });
 *     this.buffer = context.isRestored() ? this.state.get() : [];
 *   }
 *   snapshotState() { this.state.update(this.buffer); }
 * }
 * ```
 */
export interface CheckpointedFunction {
  initializeState(context: FunctionInitializationContext): Promise<void> | void;
  snapshotState(context: FunctionSnapshotContext): Promise<void> | void;
}

/**
 * Told when a checkpoint completed (it is durable and every operator took part) or was aborted —
 * Flink's `CheckpointListener`. Notifications are best effort: one may be skipped and a later id
 * arrive instead, which subsumes every lower one.
 *
 * @example
 * ```ts
 * notifyCheckpointComplete(checkpointId: number) { this.commitUpTo(checkpointId); }
 * ```
 */
export interface CheckpointListener {
  notifyCheckpointComplete(checkpointId: number): Promise<void> | void;
  notifyCheckpointAborted?(checkpointId: number): Promise<void> | void;
}

/**
 * Whether a value implements {@link CheckpointedFunction}.
 *
 * @example
 * ```ts
 * if (isCheckpointedFunction(sink)) await sink.snapshotState(context);
 * ```
 */
export function isCheckpointedFunction(value: unknown): value is CheckpointedFunction {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as CheckpointedFunction).initializeState === "function" &&
    typeof (value as CheckpointedFunction).snapshotState === "function"
  );
}

/**
 * Whether a value implements {@link CheckpointListener}.
 *
 * @example
 * ```ts
 * if (isCheckpointListener(sink)) await sink.notifyCheckpointComplete(7);
 * ```
 */
export function isCheckpointListener(value: unknown): value is CheckpointListener {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as CheckpointListener).notifyCheckpointComplete === "function"
  );
}
