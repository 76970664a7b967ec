import type { CheckpointHistoryEntry } from "./checkpoint-history-entries.js";

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
  /**
   * The incarnation of the process that wrote it (see {@link CheckpointStorage.claimIncarnation}).
   * `store` refuses the checkpoint with `SUPERSEDED` once a newer incarnation of its scope was
   * claimed. Absent in checkpoints written by tools and in older metadata without it: never checked.
   */
  readonly incarnation?: number;
  /**
   * The scope `incarnation` belongs to, when it is not `scope`: a lineage's base checkpoint (scope
   * `"base"`) is written by a process of its own scope, and is fenced with that scope — so a frozen
   * process that resumes after a newer one claimed its scope cannot store a base either.
   */
  readonly incarnationScope?: string;
  /**
   * The lineage the checkpoint belongs to: the id of the base checkpoint (scope `"base"`) that the
   * job's current parallelism and deployment shape started from, or 0 for the first lineage, which
   * started empty. Absent means 0. See the restore rule in the core README.
   */
  readonly lineage?: number;
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
  /**
   * Stores a completed checkpoint atomically. With `metadata.incarnation` set, it refuses with
   * `SUPERSEDED` once a newer incarnation of `fencingScopeOf(metadata)` (the `incarnationScope`,
   * else the `scope`) was claimed — checked atomically with the write.
   */
  store(checkpoint: CompletedCheckpoint): Promise<void>;
  /** Completed checkpoints of a job, every scope, ordered by checkpoint id then scope. */
  list(jobId: string): Promise<CheckpointMetadata[]>;
  load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint>;
  discard(jobId: string, scope: string, checkpointId: number): Promise<void>;
  /**
   * Registers a new incarnation of a scope — a process (attempt) that is about to restore and run
   * the scope's subtasks — and fences every earlier incarnation of that scope.
   *
   * - Returns a number greater than every number this storage returned before for the job, in any
   *   scope (so it can name the attempt in transaction ids).
   * - Atomic fence: once it resolves, `store` of a checkpoint whose `metadata.incarnation` is an
   *   earlier incarnation of the same scope rejects with a `CheckpointError` coded `SUPERSEDED`. A
   *   store that raced the claim either landed before the claim resolved (and `list` shows it) or
   *   fails. This is what keeps a frozen or timed-out writer from landing a checkpoint later.
   * - With `after`: claims only when `after` is still the newest incarnation of the scope (an
   *   in-process restart of that incarnation), otherwise rejects with `SUPERSEDED` — a newer process
   *   took the scope over and this one must stop instead of fencing it in turn.
   * - Rejects with `SUPERSEDED` too when a concurrent claim of the same scope won.
   *
   * @example
   * ```ts
   * const incarnation = await storage.claimIncarnation("orders", "subtask-0-of-2");
   * await storage.store(createCompletedCheckpoint({ ...facts, incarnation }));
   * // in-process restart of the same process:
   * const next = await storage.claimIncarnation("orders", "subtask-0-of-2", { after: incarnation });
   * ```
   */
  claimIncarnation(jobId: string, scope: string, options?: ClaimIncarnationOptions): Promise<number>;
  /**
   * The scopes of a job that ever had an incarnation claimed, sorted — also those of processes that
   * never stored a checkpoint. A rescale fences the ones of another shape, so that an old process
   * that is still alive (frozen, slow to stop) cannot commit next to the new ones.
   *
   * @example
   * ```ts
   * await storage.claimedScopes("orders"); // ["subtask-0-of-2", "subtask-1-of-2"]
   * ```
   */
  claimedScopes(jobId: string): Promise<string[]>;
  /**
   * The series the job's incarnation numbers belong to, and the newest number handed out so far.
   * The series id is made together with the job's incarnation counter and kept as long as it is:
   * a new or reset storage counts incarnations from 1 again under a new id. Numbers compare only
   * within one series — a connector that records incarnations outside the storage (an epoch table,
   * transactional ids) records the series with them, or asks for `newest`: a number above it was
   * never handed out by this storage.
   *
   * @example
   * ```ts
   * const { series, newest } = await storage.describeIncarnations("orders"); // { series: "3f9c…", newest: 12 }
   * ```
   */
  describeIncarnations(jobId: string): Promise<IncarnationSeries>;
  /**
   * Records one fact of the job's checkpoint history — a checkpoint completed, failed (with its
   * reason) or restored — and keeps only the newest `keep` entries of its scope. The history is kept
   * apart from the checkpoints: `discard` (retention) never removes an entry. It is for people (the
   * dashboard, `onceflow checkpoints list`), never for restoring, so it need not be durable at
   * once: the coordinator records without waiting, after a checkpoint completed.
   *
   * @example
   * ```ts
   * await storage.recordHistory({ kind: "restored", jobId: "orders", scope: "all", checkpointId: 12, at: Date.now(), lineage: 0 }, 100);
   * ```
   */
  recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void>;
  /**
   * The job's recorded history, every scope, oldest first (see `compareHistoryEntries`): at most
   * `keep` entries per scope, those of checkpoints long discarded included. Empty for a job never seen.
   *
   * @example
   * ```ts
   * const failed = (await storage.readHistory("orders")).filter((entry) => entry.kind === "failed");
   * ```
   */
  readHistory(jobId: string): Promise<CheckpointHistoryEntry[]>;
  close?(): Promise<void>;
}

/**
 * What {@link CheckpointStorage.describeIncarnations} answers.
 *
 * @example
 * ```ts
 * const described: IncarnationSeries = { series: "3f9c2a7be1d04c55", newest: 12 };
 * ```
 */
export interface IncarnationSeries {
  /** Made with the job's incarnation counter; a reset storage has a new one. */
  readonly series: string;
  /** The newest incarnation number handed out for the job (every scope), 0 before the first. */
  readonly newest: number;
}

/**
 * Options of {@link CheckpointStorage.claimIncarnation}.
 *
 * @example
 * ```ts
 * const options: ClaimIncarnationOptions = { after: 7 };
 * ```
 */
export interface ClaimIncarnationOptions {
  /** Claim only if this incarnation is still the newest of the scope; otherwise reject with `SUPERSEDED`. */
  readonly after?: number;
}
