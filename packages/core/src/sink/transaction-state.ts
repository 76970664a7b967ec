// The checkpointed state of a TwoPhaseCommitSink: one element per transaction, and which old
// subtask's elements a subtask owns after a rescale.

/**
 * One element of the sink's checkpointed state: one per transaction, tagged with the subtask that
 * wrote it. The state is a union list state, so after a rescale every subtask sees every element
 * and keeps those of the old subtasks it owns (see {@link ownsOldSubtask}).
 */
export interface TransactionStateEntry {
  /** `pending`: pre-committed under `checkpointId`. `open`: began after `checkpointId`, never pre-committed. */
  readonly kind: "pending" | "open";
  readonly checkpointId: number;
  readonly transaction: Buffer;
  readonly startedAt: number;
  /** The subtask that wrote the element, and the parallelism it ran at. */
  readonly subtaskIndex: number;
  readonly parallelism: number;
}

/**
 * After a rescale, old subtask `old` is recovered by new subtask `old % parallelism`: the same
 * owner for its pending transactions (committed), its open ones (aborted) and whatever else it left
 * behind (fenced or rolled back by `finishRecoveringTransactions`). One owner for all three matters:
 * were the pending transactions dealt out to other subtasks, the owner could fence or roll back a
 * transaction before another subtask had committed it.
 */
export function ownsOldSubtask(subtaskIndex: number, parallelism: number, oldSubtaskIndex: number): boolean {
  return oldSubtaskIndex % parallelism === subtaskIndex;
}

/** A transaction with its serialized handle (pending handles never change, so they are serialized once). */
export interface TransactionHolder<TXN> {
  readonly checkpointId: number;
  readonly transaction: TXN;
  readonly startedAt: number;
  bytes: Buffer | undefined;
}

/** The union list state a TwoPhaseCommitSink keeps its transactions in (read by `readHarnessTransactions`). */
export const TRANSACTION_STATE_NAME = "pending-transactions";
