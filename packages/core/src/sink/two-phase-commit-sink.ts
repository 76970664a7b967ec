import type {
  CheckpointedFunction,
  CheckpointListener,
  FunctionInitializationContext,
  FunctionSnapshotContext,
  RuntimeContext,
} from "../api/checkpointed-function.js";
import {
  CheckpointError,
  ConfigurationError,
  isOnceflowError,
  type OnceflowError,
  RecoveryError,
} from "../errors/onceflow-error.js";
import { type Logger, silentLogger } from "../observability/logger.js";
import { type Counter, MetricNames } from "../observability/metrics.js";
import { defaultSerializerFor } from "../state/serializer.js";
import type { ListState } from "../state/state.js";
import { BackgroundCommit } from "./background-commit.js";
import { PendingTransactions } from "./pending-transactions.js";
import type { Sink, SinkContext } from "./sink.js";
import { SinkTransactionMetrics } from "./sink-transaction-metrics.js";
import {
  commitWithRetry,
  type TransactionCommitter,
  type TransactionTimeoutPolicy,
  warnIfNearTimeout,
} from "./transaction-commit.js";
import {
  recoveryShareOf,
  stateEntriesOf,
  TRANSACTION_STATE_NAME,
  TransactionCodec,
  type TransactionHolder,
  type TransactionStateEntry,
} from "./transaction-state.js";
import {
  type CommitErrorClassification,
  type CommitRetryOptions,
  type PendingTransaction,
  type TwoPhaseCommitSinkOptions,
  validateCommitRetry,
  validateTransactionTimeout,
} from "./two-phase-commit-options.js";

/**
 * The base of exactly-once sinks — Flink's `TwoPhaseCommitSinkFunction`. Records go into a
 * transaction of the external system; the transaction is pre-committed when a checkpoint barrier
 * passes the sink and committed once that checkpoint is durable, so output appears exactly once
 * whatever fails in between. The class owns the protocol; an author writes the transaction
 * operations:
 *
 * | author implements | called when |
 * |---|---|
 * | `beginTransaction()` | at start and right after each pre-commit |
 * | `invoke(txn, value, context)` (and optionally `invokeBatch`) | for each record |
 * | `preCommit(txn, checkpoint)` | checkpoint barrier: flush, make the data durable but invisible |
 * | `commit(txn)` | the checkpoint completed: make it visible. **Must be idempotent** (it runs again after a crash) |
 * | `abort(txn)` | the open transaction on close or failure |
 * | `recoverAndCommit(txn)` / `recoverAndAbort(txn)` | after a restore, from another process (defaults: `commit` / `abort`) |
 * | `finishRecoveringTransactions()` | once in `initializeState`, after recovery: clean up what a crashed attempt left |
 * | `classifyCommitError(error, txn)` | a commit failed: retry, timed out, fenced or fatal |
 * | `openResources(context)` | once per attempt, first thing in `initializeState`: open connections, pools, clients |
 * | `closeResources()` | once per attempt, last thing: close what `openResources` opened |
 *
 * Resources — Flink's `RichFunction.open`/`close`: an attempt runs, per subtask,
 * `openResources` → recovery (`recoverAndCommit`, `recoverAndAbort`, `finishRecoveringTransactions`)
 * → `beginTransaction` → records and checkpoints → `close()`: the abort of the open transaction →
 * `closeResources`. `closeResources` runs exactly once per attempt that called `openResources`,
 * whichever way the attempt ends: `close()` after success or failure (also when an abort in it
 * throws), a failure of `initializeState` itself (recovery, or `openResources` — so it must cope
 * with a half-open state), or a reused instance starting its next attempt without a `close()`.
 * It does not run after a SIGKILL (nothing does); the external system drops the connections.
 *
 * The protocol, per subtask:
 *
 * 1. `snapshotState(N)`: pre-commit the open transaction, file it as pending under N, begin the
 *    next one, and store pending and open transactions in the operator state
 *    (a union list state named `pending-transactions`, one element per transaction tagged with its
 *    subtask). After a rescale from P to Q subtasks, new subtask `i` recovers the transactions of
 *    every old subtask `s` with `s % Q === i` — see {@link TwoPhaseCommitSink.recoveredSubtaskIndexes}.
 * 2. `notifyCheckpointComplete(N)`: commit every pending transaction with id ≤ N in ascending order,
 *    retrying with exponential backoff. A commit that never succeeds throws a `TransactionError`
 *    (`COMMIT_FAILED`) and the transaction stays pending: it is in every later checkpoint and is
 *    committed after the restart. It is never dropped silently.
 * 3. `notifyCheckpointAborted(N)`: nothing; pending transactions wait for a later checkpoint.
 * 4. `initializeState` after a restore: `recoverAndCommit` every restored pending transaction (in
 *    ascending checkpoint id), then `recoverAndAbort` the restored open one(s), then
 *    `finishRecoveringTransactions()`, then begin a new transaction.
 * 5. `close()`: abort the open transaction (errors are logged, not thrown, so they never mask the
 *    failure that led to the close). Pending transactions are left alone: they belong to a
 *    checkpoint that may still complete, or be recovered.
 *
 * The public methods (`initializeState`, `open`, `write`, `writeBatch`, `snapshotState`,
 * `notifyCheckpointComplete`, `notifyCheckpointAborted`, `finish`, `close`) are called by the
 * runtime and implement the protocol: do not override them. Empty transactions (no record) go
 * through the same path; skip the work in `preCommit`/`commit` if the external system dislikes them.
 *
 * @example
 * ```ts
 * class ListSink extends TwoPhaseCommitSink<string, { id: string; lines: string[] }> {
 *   protected beginTransaction() { return { id: randomUUID(), lines: [] }; }
 *   protected invoke(txn: { lines: string[] }, value: string) { txn.lines.push(value); }
 *   protected async preCommit(txn: { id: string; lines: string[] }) { await store.stage(txn.id, txn.lines); }
 *   protected async commit(txn: { id: string }) { await store.publish(txn.id); } // idempotent
 *   protected async abort(txn: { id: string }) { await store.discard(txn.id); }
 * }
 * ```
 */
export abstract class TwoPhaseCommitSink<IN, TXN>
  implements Sink<IN>, CheckpointedFunction, CheckpointListener
{
  /** Shown in logs and errors. */
  readonly name: string;
  /** The options' `transactionSerializer`, with typed errors that name this sink. */
  private readonly transactionSerializer: TransactionCodec<TXN>;
  private readonly timeoutPolicy: TransactionTimeoutPolicy;
  private readonly commitRetry: Required<CommitRetryOptions>;
  private readonly backgroundCommits: boolean;

  private context: RuntimeContext | undefined;
  private log: Logger = silentLogger;
  private state: ListState<TransactionStateEntry> | undefined;
  private readonly pending = new PendingTransactions<TXN>();
  private current: TransactionHolder<TXN> | undefined;
  private latestCheckpointId = 0;
  private recoveredSubtasks: readonly number[] = [];
  private commitRetries: Counter | undefined;
  private transactionMetrics: SinkTransactionMetrics | undefined;
  private closed = false;
  /** Between `openResources` and `closeResources` of an attempt. */
  private resourcesOpen = false;
  /** The commit running in the background (`backgroundCommits`) and its failure. */
  private readonly committing = new BackgroundCommit();
  /** Input ended (or the final checkpoint began): commits run inline from then on. */
  private finishing = false;

  constructor(options: TwoPhaseCommitSinkOptions<TXN> = {}) {
    this.name = options.name ?? new.target.name;
    this.transactionSerializer = new TransactionCodec(
      options.transactionSerializer ?? defaultSerializerFor<TXN>(),
      this.name,
      (transaction) => this.describeTransaction(transaction),
    );
    this.timeoutPolicy = validateTransactionTimeout(options);
    this.commitRetry = validateCommitRetry(options.commitRetry ?? {});
    this.backgroundCommits = options.backgroundCommits ?? false;
  }

  // ---- what an author implements ------------------------------------------------------------

  /** Starts a new transaction. {@link TwoPhaseCommitSink.lastCheckpointId} is the checkpoint it begins after. */
  protected abstract beginTransaction(): Promise<TXN> | TXN;

  /** Writes one record into the transaction. */
  protected abstract invoke(transaction: TXN, value: IN, context: SinkContext): Promise<void> | void;

  /** Optional fast path: writes a whole batch into the transaction (otherwise `invoke` runs per record). */
  protected invokeBatch?(transaction: TXN, values: readonly IN[], context: SinkContext): Promise<void> | void;

  /**
   * Makes the transaction's data durable in the external system without making it visible
   * (flush, prepare). After it returns, `commit` must be able to succeed, also from another process
   * given the serialized handle. Changes made to the handle here are stored in the checkpoint.
   */
  protected abstract preCommit(transaction: TXN, checkpoint: FunctionSnapshotContext): Promise<void> | void;

  /** Makes a pre-committed transaction visible. Must be idempotent: after a crash it runs again. */
  protected abstract commit(transaction: TXN): Promise<void> | void;

  /** Discards a transaction that will never be committed. Should tolerate one that is already gone. */
  protected abstract abort(transaction: TXN): Promise<void> | void;

  /** Commits a pending transaction restored from a checkpoint (possibly written by another process). Defaults to `commit`. */
  protected recoverAndCommit(transaction: TXN): Promise<void> | void {
    return this.commit(transaction);
  }

  /** Aborts a transaction that was open when the restored checkpoint was taken. Defaults to `abort`. */
  protected recoverAndAbort(transaction: TXN): Promise<void> | void {
    return this.abort(transaction);
  }

  /**
   * Called once in `initializeState`, after restored transactions were committed and aborted (and
   * also on a fresh start, where there were none), before the first new transaction begins: the
   * place to clean up what a crashed attempt left behind (Kafka: abort lingering transactional ids;
   * files: delete stale staging files). {@link TwoPhaseCommitSink.lastCheckpointId} is the restored
   * checkpoint id (0 on a fresh start). Default: nothing.
   */
  protected finishRecoveringTransactions(): Promise<void> | void {}

  /**
   * Opens what the sink needs to reach the external system — a connection pool, a client — once
   * per attempt, as the first thing in `initializeState`, before any recovery or transaction step
   * (Flink's `RichFunction.open`). {@link TwoPhaseCommitSink.runtimeContext} is available. Store
   * what it opens on the instance; {@link TwoPhaseCommitSink.closeResources} closes it. If it
   * throws, the attempt fails and `closeResources` still runs. Default: nothing.
   *
   * @example
   * ```ts
   * protected override async openResources(context: RuntimeContext) {
   *   this.pool = new Pool({ connectionString: this.url, application_name: `${context.jobId}-${context.subtaskIndex}` });
   * }
   * ```
   */
  protected openResources(_context: RuntimeContext): Promise<void> | void {}

  /**
   * Closes what {@link TwoPhaseCommitSink.openResources} opened, exactly once per attempt, after
   * everything else of the attempt (the abort of the open transaction in `close()`, or a failed
   * `initializeState`) — Flink's `RichFunction.close`. Runs even when the abort failed or
   * `openResources` threw half-way, so check what exists. Its error is thrown by `close()` (after
   * the rest of `close()` ran). Do not override `close()` itself: override this. Default: nothing.
   *
   * @example
   * ```ts
   * protected override async closeResources() {
   *   await this.pool?.end();
   *   this.pool = undefined;
   * }
   * ```
   */
  protected closeResources(): Promise<void> | void {}

  /** A short printable id of the transaction, for logs and errors. Default: its JSON, shortened. */
  protected describeTransaction(transaction: TXN): string {
    try {
      const text = JSON.stringify(transaction, (_key, value: unknown) =>
        typeof value === "bigint" ? value.toString() : value,
      );
      if (text !== undefined) return text.length > 200 ? `${text.slice(0, 197)}...` : text;
    } catch {
      // Not JSON-able (cycles): fall through to String().
    }
    return String(transaction);
  }

  /**
   * What a failed `commit`/`recoverAndCommit` means (see {@link CommitErrorClassification}).
   * Default: `retry`. Connectors override it to tell "the external system aborted it" (`timed-out`)
   * and "someone else owns it now" (`fenced`) apart from transient errors.
   */
  protected classifyCommitError(
    _error: unknown,
    _transaction: TXN,
  ): CommitErrorClassification | Promise<CommitErrorClassification> {
    return "retry";
  }

  // ---- for subclasses -----------------------------------------------------------------------

  /** The runtime context (subtask index, parallelism, logger, metrics); available from `initializeState` on. */
  protected get runtimeContext(): RuntimeContext {
    if (this.context === undefined) throw this.notInitialized("runtimeContext");
    return this.context;
  }

  /** The runtime's logger, bound to this sink's name. */
  protected get logger(): Logger {
    return this.log;
  }

  /**
   * The id of the latest checkpoint this instance took part in: the last `snapshotState`, or the
   * restored checkpoint (0 on a fresh start). Inside `beginTransaction` it is the checkpoint the new
   * transaction begins after.
   */
  protected get lastCheckpointId(): number {
    return this.latestCheckpointId;
  }

  /**
   * The subtask indexes of the previous run whose transactions this subtask recovered: its own
   * and, after the parallelism went down from P to Q, every old `s < P` with `s % Q` equal to this
   * subtask's index. `finishRecoveringTransactions` cleans up after all of them (fence their
   * transactional ids, roll back their prepared transactions, delete their staging files), since no
   * other subtask will. A fresh start recovers only its own index.
   *
   * @example
   * ```ts
   * // restored from parallelism 5 at parallelism 2, in subtask 1:
   * this.recoveredSubtaskIndexes(); // [1, 3]
   * ```
   */
  protected recoveredSubtaskIndexes(): readonly number[] {
    return this.recoveredSubtasks;
  }

  // ---- introspection --------------------------------------------------------------------------

  /**
   * Checkpoint ids of the pre-committed transactions not committed yet, ascending.
   *
   * @example
   * ```ts
   * await sink.notifyCheckpointComplete(3);
   * sink.pendingCheckpointIds(); // [4] — checkpoint 4 was pre-committed but has not completed
   * ```
   */
  pendingCheckpointIds(): number[] {
    return this.pending.all().map((holder) => holder.checkpointId);
  }

  /**
   * The pre-committed transactions not committed yet, ascending by checkpoint id.
   *
   * @example
   * ```ts
   * const oldest = sink.pendingTransactions()[0]?.startedAt;
   * ```
   */
  pendingTransactions(): PendingTransaction<TXN>[] {
    return this.pending.all().map(({ checkpointId, transaction, startedAt }) => ({
      checkpointId,
      transaction,
      startedAt,
    }));
  }

  /**
   * The open transaction that records go into now, if any.
   *
   * @example
   * ```ts
   * const open = sink.currentTransaction();
   * ```
   */
  currentTransaction(): TXN | undefined {
    return this.current?.transaction;
  }

  // ---- the protocol (called by the runtime; do not override) ----------------------------------

  /**
   * Opens the attempt's resources ({@link TwoPhaseCommitSink.openResources}), registers the state,
   * recovers restored transactions and begins the first transaction. If any of it fails, the
   * resources are closed ({@link TwoPhaseCommitSink.closeResources}) before the error is thrown.
   *
   * @example
   * ```ts
   * await sink.initializeState(initializationContext); // the runtime does this before open
   * ```
   */
  async initializeState(context: FunctionInitializationContext): Promise<void> {
    // The runtime may reuse one instance for the next attempt: nothing of the failed one may leak in
    // (its pending transactions belong to checkpoints that the restored state knows, or that failed).
    // A commit of the failed attempt may still run in the background: let it end first.
    await this.committing.settled();
    // An earlier attempt on this instance that never closed: its resources go before new ones open.
    if (this.resourcesOpen) await this.releaseResources().catch(() => undefined);
    this.committing.reset();
    this.finishing = false;
    this.pending.reset();
    this.current = undefined;
    this.closed = false;
    const restoredCheckpointId = context.isRestored() ? (context.getRestoredCheckpointId() ?? 0) : 0;
    this.latestCheckpointId = restoredCheckpointId;
    this.bindContext(context);
    this.transactionMetrics?.close();
    this.transactionMetrics = new SinkTransactionMetrics(context, () =>
      this.pending.all().map((holder) => holder.startedAt),
    );
    // Present at 0 from the start, so `increase()` and alerts work before the first retry.
    this.retriesCounter().inc(0, this.metricLabels());
    this.resourcesOpen = true;
    try {
      await this.openResources(context);
      await this.recoverAndBegin(context, restoredCheckpointId);
    } catch (error) {
      // The attempt ends here: no close() may follow (the runtime closes only what started).
      await this.releaseResources().catch(() => undefined);
      throw error;
    }
  }

  /** `initializeState` after the resources are open: recovery, then the first transaction. */
  private async recoverAndBegin(
    context: FunctionInitializationContext,
    restoredCheckpointId: number,
  ): Promise<void> {
    const state = context
      .getOperatorStateStore()
      .getUnionListState<TransactionStateEntry>({ name: TRANSACTION_STATE_NAME });
    this.state = state;
    const { subtaskIndex, parallelism } = context;
    this.recoveredSubtasks = [subtaskIndex];
    if (context.isRestored()) {
      const { recoveredSubtasks, entries } = recoveryShareOf(state.get(), subtaskIndex, parallelism);
      this.recoveredSubtasks = recoveredSubtasks;
      const pending = entries
        .filter((entry) => entry.kind === "pending")
        .map((entry) => this.transactionSerializer.restore(entry))
        .sort((a, b) => a.checkpointId - b.checkpointId);
      const open = entries
        .filter((entry) => entry.kind === "open")
        .map((entry) => this.transactionSerializer.restore(entry));
      this.log.info(
        { restoredCheckpointId, pending: pending.length, open: open.length },
        "recovering transactions from the restored checkpoint",
      );
      // Kept as pending until committed, so a failure here leaves nothing half-forgotten.
      this.pending.restored(pending);
      this.transactionMetrics?.update();
      await this.commitUpTo(Number.POSITIVE_INFINITY, true);
      for (const holder of open) {
        try {
          await this.recoverAndAbort(holder.transaction);
        } catch (error) {
          throw this.asRecoveryError(
            error,
            `cannot abort transaction ${this.describeTransaction(holder.transaction)} left open at checkpoint ${holder.checkpointId}`,
          );
        }
        this.log.debug(
          { checkpointId: holder.checkpointId, transaction: this.describeTransaction(holder.transaction) },
          "aborted transaction left open at the restored checkpoint",
        );
      }
    }
    try {
      await this.finishRecoveringTransactions();
    } catch (error) {
      throw this.asRecoveryError(error, "finishing the recovery of transactions failed");
    }
    state.update([]);
    await this.beginNext();
  }

  /**
   * Binds the runtime context. Throws a `ConfigurationError` if `initializeState` did not run first.
   *
   * @example
   * ```ts
   * await sink.open(runtimeContext);
   * ```
   */
  open(context: RuntimeContext): void {
    if (this.state === undefined) throw this.notInitialized("open");
    this.bindContext(context);
  }

  /**
   * Writes one record into the open transaction.
   *
   * @example
   * ```ts
   * await sink.write(record, sinkContext);
   * ```
   */
  write(value: IN, context: SinkContext): Promise<void> | void {
    this.committing.throwIfFailed();
    return this.invoke(this.requireCurrent("write").transaction, value, context);
  }

  /**
   * Writes a batch into the open transaction: `invokeBatch` when the author gave one, else `invoke`
   * per record (staying synchronous while `invoke` is).
   *
   * @example
   * ```ts
   * await sink.writeBatch(records, sinkContext);
   * ```
   */
  writeBatch(values: readonly IN[], context: SinkContext): Promise<void> | void {
    this.committing.throwIfFailed();
    const transaction = this.requireCurrent("writeBatch").transaction;
    if (this.invokeBatch !== undefined) return this.invokeBatch(transaction, values, context);
    for (let index = 0; index < values.length; index++) {
      const result = this.invoke(transaction, values[index] as IN, context);
      if (result !== undefined) return this.invokeRemaining(transaction, values, index + 1, context, result);
    }
  }

  /**
   * Pre-commits the open transaction as pending under the checkpoint, begins the next one, and
   * writes both into the operator state.
   *
   * @example
   * ```ts
   * await sink.snapshotState({ checkpointId: 7, checkpointTimestamp: Date.now() });
   * ```
   */
  async snapshotState(context: FunctionSnapshotContext): Promise<void> {
    const state = this.state;
    if (state === undefined) throw this.notInitialized("snapshotState");
    const { checkpointId } = context;
    this.committing.throwIfFailed();
    // The job's last checkpoint (also on a stop, which has no finish()): commit it inline.
    if (context.isFinal === true) this.finishing = true;
    const holder = this.requireCurrent("snapshotState", checkpointId);
    warnIfNearTimeout(this.committer(), holder, checkpointId, "pre-commit");
    await this.preCommit(holder.transaction, context);
    this.current = undefined;
    const pending: TransactionHolder<TXN> = { ...holder, checkpointId, bytes: undefined };
    pending.bytes = this.transactionSerializer.serialize(pending, checkpointId);
    this.pending.preCommitted(pending);
    this.transactionMetrics?.update();
    this.latestCheckpointId = checkpointId;
    this.log.debug(
      { checkpointId, transaction: this.describeTransaction(pending.transaction) },
      "pre-committed transaction",
    );
    await this.beginNext();
    const open = this.current as TransactionHolder<TXN> | undefined;
    const writer = {
      subtaskIndex: this.runtimeContext.subtaskIndex,
      parallelism: this.runtimeContext.parallelism,
    };
    state.update(stateEntriesOf(this.pending.all(), open, checkpointId, writer, this.transactionSerializer));
  }

  /**
   * Commits every pending transaction of this checkpoint and of the ones it subsumes, oldest first.
   *
   * @example
   * ```ts
   * await sink.notifyCheckpointComplete(7);
   * ```
   */
  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    // One commit at a time, in order: also what keeps the background backlog at one.
    await this.awaitBackgroundCommit();
    if (!this.commitsInBackground() || this.finishing) {
      await this.commitUpTo(checkpointId, false);
      return;
    }
    // A failure surfaces at the next write, snapshot or notification; the transaction stays pending.
    this.committing.start(this.commitUpTo(checkpointId, false), (error) => {
      this.log.error(
        { err: error, checkpointId, pendingCheckpointIds: this.pendingCheckpointIds() },
        "background commit failed; the job fails at the sink's next call and the transaction stays pending in every checkpoint until a restart commits it",
      );
    });
  }

  /**
   * Whether {@link notifyCheckpointComplete} commits in the background: asked at every
   * notification, `backgroundCommits` by default. Override it when the sink knows better only once
   * it runs (PostgresSink commits in the background by default in staging mode, which `auto` may
   * pick at start). `commit` must then tolerate running beside `invoke` and `preCommit`.
   *
   * @example
   * ```ts
   * class MySink extends TwoPhaseCommitSink<Row, Txn> {
   *   protected override commitsInBackground(): boolean {
   *     return this.slowCommits; // known once connected
   *   }
   * }
   * ```
   */
  protected commitsInBackground(): boolean {
    return this.backgroundCommits;
  }

  /**
   * Resolves once the commit running in the background (with `backgroundCommits`) has finished, and
   * rejects with its failure. Resolves at once when none runs.
   *
   * @example
   * ```ts
   * await sink.notifyCheckpointComplete(7);
   * await sink.awaitBackgroundCommit(); // checkpoint 7's output is visible now
   * ```
   */
  async awaitBackgroundCommit(): Promise<void> {
    await this.committing.settled();
    this.committing.throwIfFailed();
  }

  /**
   * The checkpoint failed and can never be restored. Transactions pre-committed for it stay
   * pending and are committed when a later checkpoint completes; if the attempt ends first,
   * `close()` aborts those that no stored checkpoint carries.
   *
   * @example
   * ```ts
   * await sink.notifyCheckpointAborted(8);
   * ```
   */
  notifyCheckpointAborted(checkpointId: number): void {
    this.pending.checkpointAborted(checkpointId);
    this.log.debug(
      { checkpointId, pendingCheckpointIds: this.pendingCheckpointIds() },
      "checkpoint aborted; pending transactions wait for a later checkpoint",
    );
  }

  /**
   * End of input: the final checkpoint that follows pre-commits and commits the last transaction,
   * inline also with `backgroundCommits`, so the job ends only once its output is committed.
   *
   * @example
   * ```ts
   * await sink.finish();
   * ```
   */
  async finish(): Promise<void> {
    this.finishing = true;
    await this.awaitBackgroundCommit();
  }

  /**
   * Waits for a background commit still running, then aborts the open transaction and every
   * pending one that only failed checkpoints carried (every checkpoint of this attempt from its
   * pre-commit on was reported aborted, so no stored checkpoint references it and nobody would
   * ever commit it); abort errors are logged, not thrown. Other pending transactions are left to
   * their checkpoint: a restart recovers them. Last, {@link TwoPhaseCommitSink.closeResources}
   * (whatever happened before; its error is thrown). A second `close()` does nothing.
   *
   * @example
   * ```ts
   * await sink.close();
   * ```
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      // A commit still running ends first (a failure was logged by commitWithRetry and stays pending).
      await this.committing.settled();
      const orphaned = this.pending.takeOrphaned();
      // What stays pending is a restart's to commit: the gauges keep showing it.
      this.transactionMetrics?.close();
      const holder = this.current;
      this.current = undefined;
      for (const each of orphaned)
        await this.abortOnClose(each, "pending transaction of a failed checkpoint");
      if (holder !== undefined) await this.abortOnClose(holder, "open transaction");
    } finally {
      await this.releaseResources();
    }
  }

  // ---- internals --------------------------------------------------------------------------------

  /** `closeResources` once per `openResources`; its failure is logged and thrown. */
  private async releaseResources(): Promise<void> {
    if (!this.resourcesOpen) return;
    this.resourcesOpen = false;
    try {
      await this.closeResources();
    } catch (error) {
      this.log.error({ err: error }, "closing the sink's resources failed");
      throw error;
    }
  }

  private async abortOnClose(holder: TransactionHolder<TXN>, what: string): Promise<void> {
    try {
      await this.abort(holder.transaction);
      this.log.debug(
        { checkpointId: holder.checkpointId, transaction: this.describeTransaction(holder.transaction) },
        `aborted the ${what}`,
      );
    } catch (error) {
      this.log.error(
        {
          err: error,
          checkpointId: holder.checkpointId,
          transaction: this.describeTransaction(holder.transaction),
        },
        `aborting the ${what} on close failed; ignored so that it does not hide the original failure (a restart aborts it)`,
      );
    }
  }

  private bindContext(context: RuntimeContext): void {
    this.context = context;
    this.log = context.logger.child({ sink: this.name });
  }

  private async beginNext(): Promise<void> {
    const startedAt = Date.now();
    const transaction = await this.beginTransaction();
    this.current = { checkpointId: this.latestCheckpointId, transaction, startedAt, bytes: undefined };
    this.log.debug(
      { afterCheckpointId: this.latestCheckpointId, transaction: this.describeTransaction(transaction) },
      "began transaction",
    );
  }

  private async invokeRemaining(
    transaction: TXN,
    values: readonly IN[],
    from: number,
    context: SinkContext,
    inFlight: Promise<void>,
  ): Promise<void> {
    await inFlight;
    for (let index = from; index < values.length; index++) {
      await this.invoke(transaction, values[index] as IN, context);
    }
  }

  /** Commits pending transactions with id ≤ `upTo` in order; the first one that fails stops it and stays pending. */
  private async commitUpTo(upTo: number, recovering: boolean): Promise<void> {
    const due = this.pending.dueUpTo(upTo);
    if (due.length === 0) {
      if (!recovering) {
        this.log.debug(
          { checkpointId: upTo, pendingCheckpointIds: this.pendingCheckpointIds() },
          "no pending transaction at or below this checkpoint: nothing to commit",
        );
      }
      return;
    }
    for (const holder of due) {
      const started = performance.now();
      const outcome = await commitWithRetry(this.committer(), holder, recovering);
      this.transactionMetrics?.observeCommit(performance.now() - started);
      this.pending.committed(holder);
      this.transactionMetrics?.update();
      this.log.debug(
        {
          checkpointId: holder.checkpointId,
          transaction: this.describeTransaction(holder.transaction),
          outcome,
        },
        recovering ? "recovered and committed transaction" : "committed transaction",
      );
    }
  }

  /** This sink as {@link commitWithRetry} sees it. */
  private committer(): TransactionCommitter<TXN> {
    return {
      sinkName: this.name,
      log: this.log,
      retry: this.commitRetry,
      timeoutPolicy: this.timeoutPolicy,
      commit: (transaction, recovering) =>
        recovering ? this.recoverAndCommit(transaction) : this.commit(transaction),
      classify: (error, transaction) => this.classifyCommitError(error, transaction),
      describe: (transaction) => this.describeTransaction(transaction),
      onRetry: () => this.retriesCounter().inc(1, this.metricLabels()),
    };
  }

  private requireCurrent(operation: string, checkpointId?: number): TransactionHolder<TXN> {
    if (this.current !== undefined) return this.current;
    if (this.state === undefined) throw this.notInitialized(operation);
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `${this.name}: ${operation} without an open transaction: the sink is closed, or beginning the transaction failed earlier`,
      { checkpointId },
    );
  }

  private notInitialized(operation: string): ConfigurationError {
    return new ConfigurationError(
      "sink",
      `${this.name}.${operation}: initializeState has not run. A TwoPhaseCommitSink must be run by the onceflow runtime (stream.sinkTo(...)), which calls initializeState before open`,
    );
  }

  private asRecoveryError(error: unknown, message: string): OnceflowError {
    if (isOnceflowError(error)) return error;
    const reason = error instanceof Error ? error.message : String(error);
    return new RecoveryError(`${this.name}: ${message}: ${reason}`, { cause: error });
  }

  private retriesCounter(): Counter {
    this.commitRetries ??= this.runtimeContext.metrics.counter(
      MetricNames.commitRetries,
      "Commits of two-phase-commit sinks that failed and were retried",
    );
    return this.commitRetries;
  }

  private metricLabels(): Record<string, string> {
    const context = this.runtimeContext;
    return { job: context.jobId, operator: context.operatorUid, subtask: String(context.subtaskIndex) };
  }
}
