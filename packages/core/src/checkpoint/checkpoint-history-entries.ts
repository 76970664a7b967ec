import { CheckpointError } from "../errors/onceflow-error.js";
import { assertCheckpointId, assertCheckpointName } from "./checkpoint-files.js";
import type { CheckpointPhases } from "./checkpoint-phases.js";

/**
 * How many checkpoint history entries a storage keeps per job and scope by default
 * (`checkpointing.history`; Flink's `web.checkpoints.history` keeps 10).
 *
 * @example
 * ```ts
 * DEFAULT_CHECKPOINT_HISTORY_SIZE; // 100
 * ```
 */
export const DEFAULT_CHECKPOINT_HISTORY_SIZE = 100;

/**
 * One fact of a job's checkpoint history, kept by the storage apart from the retained checkpoints
 * (so it outlives `retained`): a completed checkpoint, a failed one with its reason, or a restore.
 *
 * @example
 * ```ts
 * const entry: CheckpointHistoryEntry = {
 *   kind: "failed", jobId: "orders", scope: "all", checkpointId: 7, at: Date.now(),
 *   reason: "checkpoint 7: its snapshots timed out", definitive: true,
 * };
 * ```
 */
export type CheckpointHistoryEntry =
  | CompletedCheckpointEntry
  | FailedCheckpointEntry
  | RestoredCheckpointEntry;

interface HistoryEntryBase {
  readonly jobId: string;
  readonly scope: string;
  readonly checkpointId: number;
  /** When it happened (ms since the epoch): completion, failure or restore. */
  readonly at: number;
  /** The incarnation of the process it happened in, when it had one. */
  readonly incarnation?: number;
}

/**
 * A checkpoint that was stored.
 *
 * @example
 * ```ts
 * const entry: CompletedCheckpointEntry = {
 *   kind: "completed", jobId: "orders", scope: "all", checkpointId: 12, triggeredAt: 1_700_000_000_000,
 *   at: 1_700_000_000_040, sizeBytes: 2048, parallelism: 2, isFinal: false, lineage: 0, incarnation: 3,
 * };
 * ```
 */
export interface CompletedCheckpointEntry extends HistoryEntryBase {
  readonly kind: "completed";
  /** When it was triggered (ms since the epoch). */
  readonly triggeredAt: number;
  readonly sizeBytes: number;
  readonly parallelism: number;
  readonly isFinal: boolean;
  readonly lineage: number;
  /** Where its time went, phase by phase (absent in entries written before phases were kept). */
  readonly phases?: CheckpointPhases;
}

/**
 * A checkpoint that did not complete.
 *
 * @example
 * ```ts
 * const entry: FailedCheckpointEntry = {
 *   kind: "failed", jobId: "orders", scope: "all", checkpointId: 13, at: Date.now(),
 *   reason: "checkpoint 13: its store did not finish within the checkpoint timeout (600000 ms)", definitive: true,
 * };
 * ```
 */
export interface FailedCheckpointEntry extends HistoryEntryBase {
  readonly kind: "failed";
  /** Why it failed: the error's message. */
  readonly reason: string;
  /** True when it can never be restored; false when whether its store landed was unknown. */
  readonly definitive: boolean;
}

/**
 * A process (or in-process restart) that restored a checkpoint.
 *
 * @example
 * ```ts
 * const entry: RestoredCheckpointEntry = { kind: "restored", jobId: "orders", scope: "all", checkpointId: 12, at: Date.now(), lineage: 0, incarnation: 4 };
 * ```
 */
export interface RestoredCheckpointEntry extends HistoryEntryBase {
  readonly kind: "restored";
  readonly lineage: number;
}

/**
 * Throws `CHECKPOINT_FAILED` unless `entry` is a well-formed history entry; storages call it before
 * they record one, so every storage refuses the same malformed entries.
 *
 * @example
 * ```ts
 * validateHistoryEntry(entry);
 * await storage.recordHistory(entry, 100);
 * ```
 */
export function validateHistoryEntry(entry: CheckpointHistoryEntry): void {
  assertCheckpointName("jobId", entry.jobId);
  assertCheckpointName("scope", entry.scope);
  assertCheckpointId(entry.checkpointId);
  if (entry.kind !== "completed" && entry.kind !== "failed" && entry.kind !== "restored") {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `a checkpoint history entry must be "completed", "failed" or "restored", got ${JSON.stringify((entry as { kind: unknown }).kind)}`,
    );
  }
  if (!Number.isFinite(entry.at)) {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `a checkpoint history entry needs a time, got ${entry.at}`,
    );
  }
}

/**
 * Throws `CHECKPOINT_FAILED` unless `keep` (how many entries of a scope to keep) is a whole number
 * of at least 1.
 *
 * @example
 * ```ts
 * assertHistorySize(100);
 * ```
 */
export function assertHistorySize(keep: number): void {
  if (!Number.isSafeInteger(keep) || keep < 1) {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `the checkpoint history keeps at least 1 entry per scope, got ${String(keep)} (checkpointing.history)`,
    );
  }
}

/**
 * Parses one stored history entry (a JSON line or column); `undefined` when it is not one — a line
 * torn by a crash, say — so that readers skip it instead of failing the whole history.
 *
 * @example
 * ```ts
 * parseHistoryEntry('{"kind":"restored","jobId":"orders","scope":"all","checkpointId":4,"at":1,"lineage":0}');
 * ```
 */
export function parseHistoryEntry(text: string): CheckpointHistoryEntry | undefined {
  try {
    const value = JSON.parse(text) as CheckpointHistoryEntry;
    validateHistoryEntry(value);
    return value;
  } catch {
    return undefined;
  }
}

/**
 * Orders history entries by time, then scope, then checkpoint id: the order `readHistory` returns.
 *
 * @example
 * ```ts
 * entries.sort(compareHistoryEntries);
 * ```
 */
export function compareHistoryEntries(a: CheckpointHistoryEntry, b: CheckpointHistoryEntry): number {
  return (
    a.at - b.at || (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0) || a.checkpointId - b.checkpointId
  );
}
