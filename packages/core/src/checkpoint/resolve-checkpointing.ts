import type { ResolvedCheckpointing } from "./checkpoint-coordinator.js";
import { DEFAULT_CHECKPOINT_HISTORY_SIZE } from "./checkpoint-history-entries.js";
import type { CheckpointStorage } from "./checkpoint-storage.js";
import { type CheckpointingOptions, defaultInitialDelay } from "./checkpointing-options.js";
import { filesystem } from "./filesystem-checkpoint-storage.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";

/**
 * A job's checkpointing options with every default filled in, or undefined with checkpointing off.
 *
 * @example
 * ```ts
 * resolveCheckpointing({ interval: 1000 }); // { interval: 1000, initialDelay: 200, timeout: 600000, … }
 * resolveCheckpointing(false); // undefined
 * ```
 */
export function resolveCheckpointing(
  options: CheckpointingOptions | false | undefined,
): ResolvedCheckpointing | undefined {
  if (!options) return undefined;
  return {
    interval: options.interval,
    initialDelay: options.initialDelay ?? defaultInitialDelay(options.interval),
    timeout: options.timeout ?? 600_000,
    minPauseBetween: options.minPauseBetween ?? 0,
    tolerableFailures: options.tolerableFailures ?? 0,
    retained: options.retained ?? 3,
    history: options.history ?? DEFAULT_CHECKPOINT_HISTORY_SIZE,
  };
}

/**
 * The storage that checkpointing options name: a new in-memory storage for `"memory"`, the given
 * storage, or by default the filesystem under `./.onceflow/checkpoints`.
 *
 * @example
 * ```ts
 * const storage = checkpointStorageOf({ interval: 1000, storage: "memory" });
 * ```
 */
export function checkpointStorageOf(checkpointing: CheckpointingOptions): CheckpointStorage {
  if (checkpointing.storage === "memory") return new MemoryCheckpointStorage();
  return checkpointing.storage ?? filesystem(".onceflow/checkpoints");
}
