import { subtaskEntriesOf } from "./checkpoint-files.js";
import type { CheckpointMetadata, CompletedCheckpoint } from "./checkpoint-storage.js";

/**
 * What {@link createCompletedCheckpoint} needs: the facts of the checkpoint and each subtask's state.
 *
 * @example
 * ```ts
 * const options: CompletedCheckpointOptions = { jobId: "orders", checkpointId: 3, scope: "all", parallelism: 1, subtaskStates: new Map([[0, state]]) };
 * ```
 */
export interface CompletedCheckpointOptions {
  readonly jobId: string;
  readonly checkpointId: number;
  readonly scope: string;
  readonly parallelism: number;
  readonly subtaskStates: ReadonlyMap<number, Buffer>;
  /** When it was triggered (ms since the epoch; default now). */
  readonly triggeredAt?: number;
  /** When it was stored (ms since the epoch; default now). */
  readonly completedAt?: number;
  readonly isFinal?: boolean;
  readonly summary?: Readonly<Record<string, unknown>>;
  /** The writer's incarnation (see `CheckpointStorage.claimIncarnation`); stores fence on it. */
  readonly incarnation?: number;
  /** The writer's scope when it is not `scope` (a base checkpoint); see `CheckpointMetadata`. */
  readonly incarnationScope?: string;
  /** The lineage (base checkpoint id, 0 for the first lineage). */
  readonly lineage?: number;
}

/**
 * Builds a {@link CompletedCheckpoint} whose metadata matches its state: sizes and SHA-256 checksums
 * computed from the buffers. The checkpoint coordinator builds every checkpoint with it; storage
 * implementations and their tests can too.
 *
 * @example
 * ```ts
 * const checkpoint = createCompletedCheckpoint({
 *   jobId: "orders", checkpointId: 3, scope: "all", parallelism: 1, subtaskStates: new Map([[0, Buffer.from("state")]]),
 * });
 * await storage.store(checkpoint);
 * ```
 */
export function createCompletedCheckpoint(options: CompletedCheckpointOptions): CompletedCheckpoint {
  const now = Date.now();
  const metadata: CheckpointMetadata = {
    formatVersion: 1,
    jobId: options.jobId,
    checkpointId: options.checkpointId,
    scope: options.scope,
    triggeredAt: options.triggeredAt ?? now,
    completedAt: options.completedAt ?? now,
    parallelism: options.parallelism,
    subtasks: subtaskEntriesOf(options.subtaskStates),
    isFinal: options.isFinal ?? false,
    summary: options.summary ?? {},
    ...(options.incarnation === undefined ? {} : { incarnation: options.incarnation }),
    ...(options.incarnationScope === undefined ? {} : { incarnationScope: options.incarnationScope }),
    ...(options.lineage === undefined ? {} : { lineage: options.lineage }),
  };
  return { metadata, subtaskStates: options.subtaskStates };
}
