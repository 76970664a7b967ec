import { randomUUID } from "node:crypto";
import type { FunctionSnapshotContext } from "../api/checkpointed-function.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import type { SinkContext, SinkFactory } from "./sink.js";
import type { CommitErrorClassification } from "./two-phase-commit-options.js";
import { TwoPhaseCommitSink } from "./two-phase-commit-sink.js";

/**
 * The handle of one {@link CollectSink} transaction: an id in its {@link CollectedOutput}.
 *
 * @example
 * ```ts
 * const transaction: CollectTransaction = { id: "collect-1f2e3d4c-3" };
 * ```
 */
export interface CollectTransaction {
  readonly id: string;
}

/** Where a transaction of the output stands, like a transaction of an external system. */
interface CollectedTransaction<T> {
  readonly values: T[];
  status: "open" | "pre-committed" | "committed" | "aborted";
}

/** Thrown by a commit the output cannot honour: retrying cannot help. */
class UncommittableTransactionError extends Error {}

/** The transactions behind a {@link CollectedOutput}; kept out of its public surface. */
class CollectStore<T> {
  readonly transactions = new Map<string, CollectedTransaction<T>>();
  readonly committedValues: T[] = [];
  /** Pre-committed, uncommitted transaction ids, in pre-commit order. */
  readonly preCommitted: string[] = [];
  private nextId = 1;
  /** Ids unique to this output: a checkpoint of another output (or process) never names one of them. */
  private readonly prefix = `collect-${randomUUID().slice(0, 8)}`;

  begin(): CollectTransaction {
    const id = `${this.prefix}-${this.nextId++}`;
    this.transactions.set(id, { values: [], status: "open" });
    return { id };
  }

  append(id: string, values: readonly T[]): void {
    const transaction = this.requireStatus(id, "open");
    for (const value of values) transaction.values.push(value);
  }

  preCommit(id: string): void {
    this.requireStatus(id, "open").status = "pre-committed";
    this.preCommitted.push(id);
  }

  /** Committing a committed transaction again does nothing: commits must be idempotent. */
  commit(id: string): void {
    if (this.transactions.get(id)?.status === "committed") return;
    const transaction = this.requireStatus(id, "pre-committed");
    transaction.status = "committed";
    for (const value of transaction.values) this.committedValues.push(value);
    this.preCommitted.splice(this.preCommitted.indexOf(id), 1);
  }

  /** Aborting twice, a committed or an unknown transaction does nothing. */
  abort(id: string): void {
    const transaction = this.transactions.get(id);
    if (transaction === undefined || transaction.status === "committed" || transaction.status === "aborted")
      return;
    if (transaction.status === "pre-committed") this.preCommitted.splice(this.preCommitted.indexOf(id), 1);
    transaction.status = "aborted";
    transaction.values.length = 0;
  }

  private requireStatus(id: string, status: CollectedTransaction<T>["status"]): CollectedTransaction<T> {
    const transaction = this.transactions.get(id);
    if (transaction?.status === status) return transaction;
    if (transaction === undefined) {
      // A restart cannot make it known: fail the job at once instead of restarting forever.
      throw new ConfigurationError(
        "checkpointing.storage",
        `the restored checkpoint names transaction ${id}, which this CollectedOutput never made: a CollectedOutput keeps its transactions in the memory of one process, so it can only recover checkpoints that its own job stored in this process. Use storage: "memory" with it, or a new storage folder for each run`,
      );
    }
    throw new UncommittableTransactionError(`transaction ${id} is ${transaction.status}, not ${status}`);
  }
}

const stores = new WeakMap<CollectedOutput<unknown>, CollectStore<unknown>>();

function storeOf<T>(output: CollectedOutput<T>): CollectStore<T> {
  return stores.get(output as CollectedOutput<unknown>) as CollectStore<T>;
}

/**
 * An in-memory "external system" for tests: the output of every {@link CollectSink} made by its
 * {@link CollectedOutput.sinkFactory}, with transactions that are open, pre-committed, committed
 * or aborted. It lives as long as the test process, so it survives in-process restarts of a job
 * (the runtime restores new sink instances from the factory, and they recover the transactions
 * their checkpoint names): `committed` then shows whether each input arrived exactly once.
 *
 * Values are kept as given (not copied): do not mutate records after they reach the sink.
 *
 * @example
 * ```ts
 * const output = new CollectedOutput<number>();
 * await new Job({ jobId: "t", checkpointing: { interval: 50, storage: "memory" } })
 *   .fromSource(numbers).map((n) => n * 2).sinkTo(output.sinkFactory()).job.execute();
 * expect(output.committed.sort()).toEqual([0, 2, 4]);
 * expect(output.pending).toEqual([]);
 * ```
 */
export class CollectedOutput<T> {
  constructor() {
    stores.set(this as CollectedOutput<unknown>, new CollectStore<unknown>());
  }

  /**
   * Values whose transaction committed, in commit order (a copy).
   *
   * @example
   * ```ts
   * expect(output.committed).toEqual(["a", "b"]);
   * ```
   */
  get committed(): T[] {
    return [...storeOf(this).committedValues];
  }

  /**
   * Values of transactions that are pre-committed but not committed yet, in pre-commit order (a copy).
   *
   * @example
   * ```ts
   * expect(output.pending).toEqual([]); // everything was committed at the end
   * ```
   */
  get pending(): T[] {
    const store = storeOf(this);
    return store.preCommitted.flatMap((id) => store.transactions.get(id)?.values ?? []);
  }

  /**
   * A factory for `sinkTo`: one {@link CollectSink} per subtask, all writing to this output.
   *
   * @example
   * ```ts
   * stream.sinkTo(output.sinkFactory());
   * ```
   */
  sinkFactory(options: { name?: string } = {}): SinkFactory<T> {
    return () => new CollectSink<T>(this, options);
  }
}

/**
 * An exactly-once in-memory sink for tests, built on {@link TwoPhaseCommitSink}: make it with
 * {@link CollectedOutput.sinkFactory} and read `output.committed`.
 *
 * @example
 * ```ts
 * const output = new CollectedOutput<string>();
 * stream.sinkTo(output.sinkFactory());
 * ```
 */
export class CollectSink<T> extends TwoPhaseCommitSink<T, CollectTransaction> {
  private readonly output: CollectStore<T>;

  constructor(output: CollectedOutput<T>, options: { name?: string } = {}) {
    // An in-memory commit has no transient failure worth retrying.
    super({ name: options.name ?? "CollectSink", commitRetry: { maxAttempts: 1 } });
    this.output = storeOf(output);
  }

  protected beginTransaction(): CollectTransaction {
    return this.output.begin();
  }

  protected invoke(transaction: CollectTransaction, value: T, _context: SinkContext): void {
    this.output.append(transaction.id, [value]);
  }

  protected override invokeBatch(
    transaction: CollectTransaction,
    values: readonly T[],
    _context: SinkContext,
  ): void {
    this.output.append(transaction.id, values);
  }

  protected preCommit(transaction: CollectTransaction, _checkpoint: FunctionSnapshotContext): void {
    this.output.preCommit(transaction.id);
  }

  protected commit(transaction: CollectTransaction): void {
    this.output.commit(transaction.id);
  }

  protected abort(transaction: CollectTransaction): void {
    this.output.abort(transaction.id);
  }

  protected override describeTransaction(transaction: CollectTransaction): string {
    return transaction.id;
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    return error instanceof UncommittableTransactionError || error instanceof ConfigurationError
      ? "fatal"
      : "retry";
  }
}
