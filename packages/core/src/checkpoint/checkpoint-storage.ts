/**
 * Where a subtask's share of a checkpoint is described in the metadata.
 *
 * @example
 * ```ts
 * const entry: SubtaskStateEntry = { subtaskIndex: 0, stateBytes: 1024, sha256: "ab12…" };
 * ```
 */
export interface SubtaskStateEntry {
  readonly subtaskIndex: number;
  readonly stateBytes: number;
  /** Hex SHA-256 of the state bytes; checked on load. */
  readonly sha256: string;
}

/**
 * The readable description of one completed checkpoint (stored as JSON).
 *
 * `scope` names which subtasks the checkpoint covers: `"all"` when one process runs every subtask,
 * `"subtask-<i>-of-<p>"` when each process runs one subtask and checkpoints on its own (subtasks
 * exchange no data, so each one's checkpoint is consistent by itself).
 *
 * @example
 * ```ts
 * const latest = (await storage.list("orders")).at(-1);
 * console.log(latest?.checkpointId, latest?.parallelism);
 * ```
 */
export interface CheckpointMetadata {
  readonly formatVersion: 1;
  readonly jobId: string;
  readonly checkpointId: number;
  readonly scope: string;
  /** When the checkpoint was triggered (ms since the epoch). */
  readonly triggeredAt: number;
  /** When it was stored (ms since the epoch). */
  readonly completedAt: number;
  readonly parallelism: number;
  readonly subtasks: readonly SubtaskStateEntry[];
  /** True for the checkpoint taken at the end of bounded input or at stop. */
  readonly isFinal: boolean;
  /** A readable summary for `onceflow checkpoints inspect`: operators, state sizes, split positions. */
  readonly summary: Readonly<Record<string, unknown>>;
}

/**
 * A checkpoint with its state bytes, one buffer per subtask.
 *
 * @example
 * ```ts
 * const checkpoint = await storage.load("orders", "all", 12);
 * checkpoint.subtaskStates.get(0)?.length;
 * ```
 */
export interface CompletedCheckpoint {
  readonly metadata: CheckpointMetadata;
  readonly subtaskStates: ReadonlyMap<number, Buffer>;
}

/**
 * Durable storage of completed checkpoints. `store` must be atomic: after a crash at any moment,
 * `list` shows the checkpoint whole or not at all. `load` must verify the checksums and throw a
 * `CheckpointError` with code `CHECKPOINT_CORRUPT` rather than return damaged state.
 *
 * Implementations: {@link MemoryCheckpointStorage}, {@link FileSystemCheckpointStorage}, and
 * `PostgresCheckpointStorage` in `@onceflow/connector-postgres`.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "orders", checkpointing: { interval: 5000, storage: filesystem("/var/lib/onceflow") } });
 * ```
 */
export interface CheckpointStorage {
  /** Shown in logs, for example `filesystem:/var/lib/onceflow`. */
  readonly description: string;
  store(checkpoint: CompletedCheckpoint): Promise<void>;
  /** Completed checkpoints of a job, every scope, ordered by checkpoint id then scope. */
  list(jobId: string): Promise<CheckpointMetadata[]>;
  load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint>;
  discard(jobId: string, scope: string, checkpointId: number): Promise<void>;
  close?(): Promise<void>;
}
