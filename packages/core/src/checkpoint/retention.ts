import { ConfigurationError } from "../errors/onceflow-error.js";
import { assertCheckpointName } from "./checkpoint-files.js";
import type { CheckpointMetadata, CheckpointStorage } from "./checkpoint-storage.js";

/** Options of {@link retainLatestCheckpoints}. */
export interface RetentionOptions {
  /**
   * Only prune this scope. A process that runs one subtask should pass its own scope: it then never
   * discards another process's checkpoints (which that process may be restoring right now).
   */
  readonly scope?: string;
}

/**
 * Keeps the `retained` newest completed checkpoints of each (job, scope) and discards the older
 * ones, oldest first (Flink's `state.checkpoints.num-retained`). Only what `list` shows is
 * considered, so a checkpoint still being written is never touched.
 *
 * @param retained how many to keep per scope, at least 1 (`checkpointing.retained`, default 3).
 * @returns the metadata of the checkpoints discarded.
 * @throws ConfigurationError when `retained` is not a positive integer.
 * @example
 * ```ts
 * await storage.store(checkpoint);
 * await retainLatestCheckpoints(storage, "orders", 3, { scope: checkpoint.metadata.scope });
 * ```
 */
export async function retainLatestCheckpoints(
  storage: CheckpointStorage,
  jobId: string,
  retained: number,
  options: RetentionOptions = {},
): Promise<CheckpointMetadata[]> {
  if (!Number.isSafeInteger(retained) || retained < 1) {
    throw new ConfigurationError(
      "checkpointing.retained",
      `must be an integer of at least 1 (the latest checkpoint is always kept), got ${String(retained)}`,
    );
  }
  if (options.scope !== undefined) assertCheckpointName("scope", options.scope);
  const byScope = new Map<string, CheckpointMetadata[]>();
  for (const metadata of await storage.list(jobId)) {
    if (options.scope !== undefined && metadata.scope !== options.scope) continue;
    const checkpoints = byScope.get(metadata.scope) ?? [];
    checkpoints.push(metadata);
    byScope.set(metadata.scope, checkpoints);
  }
  const discarded: CheckpointMetadata[] = [];
  for (const checkpoints of byScope.values()) {
    // `list` is ordered by id, so everything before the last `retained` is older.
    for (const metadata of checkpoints.slice(0, Math.max(0, checkpoints.length - retained))) {
      await storage.discard(metadata.jobId, metadata.scope, metadata.checkpointId);
      discarded.push(metadata);
    }
  }
  return discarded;
}
