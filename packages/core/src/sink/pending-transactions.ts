import type { TransactionHolder } from "./transaction-state.js";

/**
 * The pre-committed transactions of a two-phase-commit sink that are not committed yet, ascending by
 * checkpoint id, and the checkpoints of the current attempt that carried them: which of them only
 * failed checkpoints carried, so that no stored checkpoint references them and nobody would ever
 * commit them (`close()` aborts those).
 *
 * @example
 * ```ts
 * const pending = new PendingTransactions<Txn>();
 * pending.preCommitted({ checkpointId: 7, transaction, startedAt: Date.now(), bytes });
 * pending.checkpointAborted(7);
 * pending.takeOrphaned(); // [the transaction of checkpoint 7]
 * ```
 */
export class PendingTransactions<TXN> {
  private holders: TransactionHolder<TXN>[] = [];
  /** Checkpoints this attempt snapshotted, and those of them reported as never restorable. */
  private snapshotIds: number[] = [];
  private readonly abortedCheckpoints = new Set<number>();

  /**
   * Forgets everything: a new attempt starts (nothing of the failed one may leak in).
   *
   * @example
   * ```ts
   * pending.reset();
   * ```
   */
  reset(): void {
    this.holders = [];
    this.snapshotIds = [];
    this.abortedCheckpoints.clear();
  }

  /**
   * The pending transactions restored from a checkpoint, ascending by checkpoint id: kept as pending
   * until committed, so a failure in the recovery leaves nothing half-forgotten.
   *
   * @example
   * ```ts
   * pending.restored(restoredHolders);
   * ```
   */
  restored(holders: TransactionHolder<TXN>[]): void {
    this.holders = holders;
  }

  /**
   * Files a transaction pre-committed in this attempt under its checkpoint.
   *
   * @example
   * ```ts
   * pending.preCommitted({ ...holder, checkpointId, bytes });
   * ```
   */
  preCommitted(holder: TransactionHolder<TXN>): void {
    this.holders.push(holder);
    this.snapshotIds.push(holder.checkpointId);
    // Ids only grow, but keep the order right even if a coordinator retries an id.
    this.holders.sort((a, b) => a.checkpointId - b.checkpointId);
  }

  /**
   * The checkpoint failed and can never be restored.
   *
   * @example
   * ```ts
   * pending.checkpointAborted(8);
   * ```
   */
  checkpointAborted(checkpointId: number): void {
    this.abortedCheckpoints.add(checkpointId);
  }

  /**
   * The pending transactions with a checkpoint id at or below `upTo`, oldest first.
   *
   * @example
   * ```ts
   * for (const holder of pending.dueUpTo(7)) await commit(holder);
   * ```
   */
  dueUpTo(upTo: number): TransactionHolder<TXN>[] {
    return this.holders.filter((holder) => holder.checkpointId <= upTo);
  }

  /**
   * The transaction is committed (or given up): no longer pending.
   *
   * @example
   * ```ts
   * pending.committed(holder);
   * ```
   */
  committed(holder: TransactionHolder<TXN>): void {
    this.holders = this.holders.filter((each) => each !== holder);
  }

  /**
   * Removes and returns the transactions pre-committed in this attempt that only failed checkpoints
   * carried (every checkpoint of this attempt from their pre-commit on was reported aborted).
   *
   * @example
   * ```ts
   * for (const holder of pending.takeOrphaned()) await abort(holder.transaction);
   * ```
   */
  takeOrphaned(): TransactionHolder<TXN>[] {
    const orphaned = this.holders.filter((holder) => this.onlyInFailedCheckpoints(holder));
    this.holders = this.holders.filter((holder) => !orphaned.includes(holder));
    return orphaned;
  }

  /**
   * Every pending transaction, ascending by checkpoint id.
   *
   * @example
   * ```ts
   * const oldest = pending.all()[0]?.startedAt;
   * ```
   */
  all(): readonly TransactionHolder<TXN>[] {
    return this.holders;
  }

  /**
   * Pre-committed in this attempt, and every checkpoint of this attempt since then failed for good.
   * A transaction restored from a checkpoint is never one: that stored checkpoint references it.
   */
  private onlyInFailedCheckpoints(holder: TransactionHolder<TXN>): boolean {
    if (!this.snapshotIds.includes(holder.checkpointId)) return false;
    return this.snapshotIds
      .filter((checkpointId) => checkpointId >= holder.checkpointId)
      .every((checkpointId) => this.abortedCheckpoints.has(checkpointId));
  }
}
