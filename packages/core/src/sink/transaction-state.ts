// The checkpointed state of a TwoPhaseCommitSink: one element per transaction, how transactions
// are written into it and read back, and which old subtask's elements a subtask owns after a rescale.
import { CheckpointError, RecoveryError } from "../errors/onceflow-error.js";
import type { TypeSerializer } from "../state/serializer.js";

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

/**
 * The old subtasks whose transactions a subtask recovers after a restore, and their elements: its
 * own index and, after the parallelism went down from P to Q, every old `s < P` with `s % Q` equal
 * to it (see {@link ownsOldSubtask}).
 *
 * @example
 * ```ts
 * // restored from parallelism 5 at parallelism 2, in subtask 1:
 * recoveryShareOf(state.get(), 1, 2).recoveredSubtasks; // [1, 3]
 * ```
 */
export function recoveryShareOf(
  all: readonly TransactionStateEntry[],
  subtaskIndex: number,
  parallelism: number,
): { recoveredSubtasks: number[]; entries: TransactionStateEntry[] } {
  const oldParallelism = Math.max(parallelism, ...all.map((entry) => entry.parallelism));
  const recoveredSubtasks: number[] = [];
  for (let old = subtaskIndex; old < oldParallelism; old += parallelism) recoveredSubtasks.push(old);
  const entries = all.filter((entry) => ownsOldSubtask(subtaskIndex, parallelism, entry.subtaskIndex));
  return { recoveredSubtasks, entries };
}

/**
 * How a sink's transaction handles become bytes and back: its `transactionSerializer`, with typed
 * errors that name the sink (`CHECKPOINT_FAILED` when writing, `RECOVERY_FAILED` when reading).
 *
 * @example
 * ```ts
 * const codec = new TransactionCodec(defaultSerializerFor<Txn>(), "orders-sink", (txn) => txn.id);
 * const bytes = codec.serialize(holder, 7);
 * ```
 */
export class TransactionCodec<TXN> {
  constructor(
    private readonly serializer: TypeSerializer<TXN>,
    private readonly sinkName: string,
    private readonly describe: (transaction: TXN) => string,
  ) {}

  /**
   * The transaction's handle as bytes, for the state of checkpoint `checkpointId`.
   *
   * @example
   * ```ts
   * holder.bytes = codec.serialize(holder, checkpointId);
   * ```
   */
  serialize(holder: TransactionHolder<TXN>, checkpointId: number): Buffer {
    try {
      return this.serializer.serialize(holder.transaction);
    } catch (error) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${this.sinkName}: cannot serialize transaction ${this.describe(holder.transaction)}: give a transactionSerializer that handles it`,
        { checkpointId, cause: error },
      );
    }
  }

  /**
   * A transaction restored from one element of the state, with its bytes kept.
   *
   * @example
   * ```ts
   * const pending = entries.filter((entry) => entry.kind === "pending").map((entry) => codec.restore(entry));
   * ```
   */
  restore(entry: TransactionStateEntry): TransactionHolder<TXN> {
    // The structured-clone state serializer may hand back a Uint8Array: make it a Buffer again.
    const raw: Uint8Array = entry.transaction;
    const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    let transaction: TXN;
    try {
      transaction = this.serializer.deserialize(bytes);
    } catch (error) {
      throw new RecoveryError(
        `${this.sinkName}: cannot read the ${entry.kind} transaction of checkpoint ${entry.checkpointId} with the transactionSerializer`,
        { cause: error, details: { checkpointId: entry.checkpointId } },
      );
    }
    return { checkpointId: entry.checkpointId, transaction, startedAt: entry.startedAt, bytes };
  }
}

/**
 * The state a sink stores at checkpoint `checkpointId`: its pending transactions (pre-committed,
 * their bytes serialized once) and the open one begun after the pre-commit, tagged with the
 * subtask that wrote them.
 *
 * @example
 * ```ts
 * state.update(stateEntriesOf(pending, open, 7, { subtaskIndex: 0, parallelism: 2 }, codec));
 * ```
 */
export function stateEntriesOf<TXN>(
  pending: readonly TransactionHolder<TXN>[],
  open: TransactionHolder<TXN> | undefined,
  checkpointId: number,
  writer: { readonly subtaskIndex: number; readonly parallelism: number },
  codec: TransactionCodec<TXN>,
): TransactionStateEntry[] {
  const entries: TransactionStateEntry[] = pending.map((each) => ({
    kind: "pending",
    checkpointId: each.checkpointId,
    transaction: each.bytes ?? codec.serialize(each, checkpointId),
    startedAt: each.startedAt,
    ...writer,
  }));
  if (open !== undefined) {
    entries.push({
      kind: "open",
      checkpointId,
      transaction: codec.serialize(open, checkpointId),
      startedAt: open.startedAt,
      ...writer,
    });
  }
  return entries;
}
