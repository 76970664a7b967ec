import type { CheckpointStorage } from "./checkpoint-storage.js";

/** The cap of the default {@link CheckpointingOptions.initialDelay}, in ms. */
export const DEFAULT_INITIAL_DELAY_MS = 200;

/**
 * The first checkpoint's delay when `initialDelay` is not set: `min(interval, 200)` ms.
 *
 * @example
 * ```ts
 * defaultInitialDelay(1000); // 200
 * defaultInitialDelay(50); // 50
 * ```
 */
export function defaultInitialDelay(interval: number): number {
  return Math.min(interval, DEFAULT_INITIAL_DELAY_MS);
}

/**
 * Checkpointing settings — Flink's `CheckpointConfig`.
 *
 * | Flink | onceflow |
 * |---|---|
 * | `enableCheckpointing(5000)` | `{ interval: 5000 }` |
 * | `setCheckpointTimeout` | `timeout` (default 10 min) |
 * | `setMinPauseBetweenCheckpoints` | `minPauseBetween` (default 0) |
 * | `setMaxConcurrentCheckpoints` | `maxConcurrent` (only 1 is supported) |
 * | `setTolerableCheckpointFailureNumber` | `tolerableFailures` (default 0) |
 * | `state.checkpoints.num-retained` | `retained` (default 3) |
 * | `web.checkpoints.history` | `history` (default 100 per scope, kept in the storage) |
 * | the random first delay in [`minPauseBetween`, `interval`] (`CheckpointCoordinator#getRandomInitDelay`) | `initialDelay` (default `min(interval, 200)`, not random) |
 *
 * @example
 * ```ts
 * const checkpointing: CheckpointingOptions = { interval: 1000, storage: filesystem("./checkpoints"), retained: 5 };
 * ```
 */
export interface CheckpointingOptions {
  /** Milliseconds between the start of one checkpoint and the next. */
  readonly interval: number;
  /**
   * Milliseconds from the moment every subtask of the attempt runs to its first checkpoint — after
   * the first start and after every restart. Default `min(interval, 200)`: the first checkpoint
   * after a (re)start carries a short stretch of records, so its output is committed (visible to
   * `read_committed` readers) within a fraction of a second instead of one whole interval; then
   * checkpoints follow every `interval`. `0` triggers right away (that checkpoint carries hardly any
   * record); set it to `interval` for the first checkpoint one interval after the start.
   */
  readonly initialDelay?: number;
  readonly timeout?: number;
  readonly minPauseBetween?: number;
  readonly maxConcurrent?: number;
  readonly tolerableFailures?: number;
  /** How many checkpoints to keep restorable per scope (default 3). */
  readonly retained?: number;
  /**
   * How many facts of the checkpoint history (completed, failed with the reason, restored) the
   * storage keeps per scope, apart from the retained checkpoints — what the dashboard and
   * `onceflow checkpoints list` show (default 100).
   */
  readonly history?: number;
  /** `"memory"` (tests), `filesystem(path)` (the default, under `./.onceflow/checkpoints`), or any storage. */
  readonly storage?: CheckpointStorage | "memory";
}
