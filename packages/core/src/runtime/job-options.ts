// What a job is given: its options, and the options of a source it reads.
import type { CheckpointingOptions } from "../checkpoint/checkpointing-options.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { WatermarkStrategy } from "../time/watermark-strategy.js";
import type { OperatorOptions } from "./data-stream.js";
import type { CrossProcessExchange } from "./exchange/cross-process-exchange.js";
import type { RestartStrategy } from "./restart-strategy.js";
import type { RestoreSetting } from "./restore/restore-plan.js";

/**
 * Settings of a {@link Job}.
 *
 * | Flink | onceflow |
 * |---|---|
 * | `env.setParallelism(4)` | `parallelism: 4` |
 * | `env.setMaxParallelism(128)` | `maxParallelism: 128` |
 * | `env.enableCheckpointing(5000)` | `checkpointing: { interval: 5000 }` |
 * | `env.setRestartStrategy(...)` | `restartStrategy: { type: "fixed-delay", attempts: 3, delay: 1000 }` |
 * | `-s <savepoint path>` | `restore: { checkpointId: 42 }` |
 *
 * @example
 * ```ts
 * const options: JobOptions = { jobId: "orders", parallelism: 2, checkpointing: { interval: 1000 } };
 * ```
 */
export interface JobOptions {
  /** Stable across restarts: checkpoints are found by it. Letters, digits, `.`, `_`, `-`. */
  readonly jobId: string;
  /** Subtasks of the whole job (default 1). */
  readonly parallelism?: number;
  /**
   * The number of key groups keyed state is divided into (default 128, at most 32768) — Flink's
   * `setMaxParallelism`: the highest parallelism the job can ever be rescaled to. Fixed for the
   * life of the job: it is stored with keyed state in every checkpoint, and a restore with another
   * value is refused (`CONFIGURATION`).
   */
  readonly maxParallelism?: number;
  /**
   * Run only this subtask in this process (for one process per subtask, e.g. a StatefulSet
   * ordinal). Without it, this process runs all `parallelism` subtasks.
   */
  readonly subtaskIndex?: number;
  /** Checkpointing; `false` or absent turns it off (then sinks commit only at the end of input). */
  readonly checkpointing?: CheckpointingOptions | false;
  /** Default: exponential-delay (1 s, ×1.5, up to 1 min). */
  readonly restartStrategy?: RestartStrategy;
  /**
   * Restore even when the checkpoint holds state that no operator of this job claims (an operator
   * whose `uid` was renamed or that was removed): that state is dropped with a warning naming it —
   * for a two-phase-commit sink, its pending transactions are then not committed by this job.
   * Default false: such a restore fails with `NON_RESTORED_STATE` (Flink's `--allowNonRestoredState`).
   */
  readonly allowNonRestoredState?: boolean;
  /**
   * Where the job starts: `"latest"` (default), `"none"`, or `{ checkpointId }`. Only the first
   * attempt that gets as far as its restore: a restart after a failure goes on from the latest
   * checkpoint. `"none"` and
   * `{ checkpointId }` are applied once: they start a lineage of their own, and a process started
   * again with the same setting (a restarted pod, a sibling process) goes on from that lineage's
   * latest checkpoint.
   */
  readonly restore?: RestoreSetting;
  /**
   * Where the job logs (any pino logger fits). Default: `defaultLogger` — warnings and errors to
   * standard error, or what `setDefaultLogger` (and `onceflow run --log-level`) set.
   */
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  /** Stop with a final checkpoint on SIGTERM/SIGINT (default false; the CLI turns it on). */
  readonly handleSignals?: boolean;
  /**
   * How records after `keyBy` reach subtasks that run in other processes (one process per subtask,
   * `subtaskIndex` set, parallelism above 1): a durable exactly-once transport, such as
   * `kafkaRepartitionExchange({ brokers })` from `@onceflow/connector-kafka`. Needs checkpointing.
   * Without it such a job is refused at start. Used whenever `subtaskIndex` is set, at parallelism
   * 1 too (so that a rescale to 1 still reads and commits what is in transit); unused when this
   * process runs every subtask (the exchange is then in memory).
   */
  readonly exchange?: CrossProcessExchange;
}

/**
 * Options of `fromSource`.
 *
 * @example
 * ```ts
 * job.fromSource(source, { uid: "orders", watermarks: { timestampAssigner: (order) => order.at, maxOutOfOrderness: 1000 } });
 * ```
 */
export interface SourceOptions<T> extends OperatorOptions {
  readonly watermarks?: WatermarkStrategy<T>;
}
