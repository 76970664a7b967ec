/** Who made a transaction: enough for a recovering subtask to find an older attempt's leftovers by id. */
export interface TransactionOwner {
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly incarnation: number;
  /** The in-process attempt number (for runs without incarnations). */
  readonly attempt: number;
  /** The explored process that began it (for messages). */
  readonly process: string;
  /** The run it belongs to: a fresh start or a reset of the checkpoint storage begins a new one. */
  readonly generation: number;
}

/** One transaction of the {@link TransactionalSystem}. */
export interface SystemTransaction {
  readonly id: string;
  readonly owner: TransactionOwner;
  readonly values: number[];
  status: "open" | "prepared" | "committed" | "aborted";
}

/** Thrown when a commit can never succeed (the transaction was aborted, or never prepared). */
export class UncommittableTransactionError extends Error {}

/** Thrown by an injected commit fault: retrying helps. */
export class TransientCommitError extends Error {}

/** How the next commit misbehaves, once. */
export type CommitFault = "transient" | "after-applied";

/**
 * The in-memory external transactional system that the explored sink writes to: transactions by id
 * that are open, prepared, committed or aborted, like Kafka's or PostgreSQL's. It records what became
 * visible (in commit order) and what is still open or prepared, and can make a commit fail — before
 * it is applied (transient) or after (the caller cannot tell it was applied).
 *
 * @example
 * ```ts
 * const system = new TransactionalSystem();
 * system.begin("t1", owner); system.write("t1", [1, 2]); system.prepare("t1"); system.commit("t1");
 * system.visible; // [1, 2]
 * ```
 */
export class TransactionalSystem {
  readonly transactions = new Map<string, SystemTransaction>();
  readonly visible: number[] = [];
  /** What became visible, per committed transaction, in commit order (who wrote it, and what). */
  readonly committed: { readonly owner: TransactionOwner; readonly values: readonly number[] }[] = [];
  /** Faults for the coming commits, first one first. */
  readonly commitFaults: CommitFault[] = [];

  begin(id: string, owner: TransactionOwner): void {
    if (this.transactions.has(id))
      throw new UncommittableTransactionError(`transaction ${id} exists already`);
    this.transactions.set(id, { id, owner, values: [], status: "open" });
  }

  write(id: string, values: readonly number[]): void {
    const transaction = this.require(id, "open", "write to");
    transaction.values.push(...values);
  }

  prepare(id: string): void {
    this.require(id, "open", "prepare").status = "prepared";
  }

  /** Idempotent: committing a committed transaction again does nothing. */
  commit(id: string): void {
    const fault = this.commitFaults.shift();
    if (fault === "transient") throw new TransientCommitError(`injected transient failure committing ${id}`);
    const transaction = this.transactions.get(id);
    if (transaction?.status !== "committed") {
      this.require(id, "prepared", "commit").status = "committed";
      this.visible.push(...transaction!.values);
      this.committed.push({ owner: transaction!.owner, values: transaction!.values });
    }
    if (fault === "after-applied") throw new TransientCommitError(`injected failure after committing ${id}`);
  }

  /** Aborting an unknown, aborted or committed transaction does nothing. */
  abort(id: string): void {
    const transaction = this.transactions.get(id);
    if (transaction?.status === "open" || transaction?.status === "prepared") transaction.status = "aborted";
  }

  /** Transactions still open or prepared. */
  unfinished(): SystemTransaction[] {
    return [...this.transactions.values()].filter(
      (each) => each.status === "open" || each.status === "prepared",
    );
  }

  private require(id: string, status: SystemTransaction["status"], action: string): SystemTransaction {
    const transaction = this.transactions.get(id);
    if (transaction?.status === status) return transaction;
    throw new UncommittableTransactionError(
      `cannot ${action} transaction ${id}: it is ${transaction?.status ?? "unknown"}, not ${status}`,
    );
  }
}
