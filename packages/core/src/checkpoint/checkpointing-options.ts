import type { CheckpointStorage } from "./checkpoint-storage.js";

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
 *
 * @example
 * ```ts
 * const checkpointing: CheckpointingOptions = { interval: 1000, storage: filesystem("./checkpoints"), retained: 5 };
 * ```
 */
export interface CheckpointingOptions {
  /** Milliseconds between the start of one checkpoint and the next. */
  readonly interval: number;
  readonly timeout?: number;
  readonly minPauseBetween?: number;
  readonly maxConcurrent?: number;
  readonly tolerableFailures?: number;
  readonly retained?: number;
  /** `"memory"` (tests), `filesystem(path)` (the default, under `./.onceflow/checkpoints`), or any storage. */
  readonly storage?: CheckpointStorage | "memory";
}
