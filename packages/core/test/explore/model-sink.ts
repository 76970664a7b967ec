import type { FunctionSnapshotContext, SinkContext } from "../../src/index.js";
import { type CommitErrorClassification, TwoPhaseCommitSink } from "../../src/index.js";
import type { ProcessGate } from "./process-gate.js";
import type { SinkHost } from "./sink-under-test.js";
import {
  type TransactionalSystem,
  type TransactionOwner,
  UncommittableTransactionError,
} from "./transactional-system.js";

/** The handle of a {@link ModelSink} transaction: its id names the subtask, incarnation and attempt. */
export interface ModelTransaction {
  readonly id: string;
  readonly owner: TransactionOwner;
}

/**
 * The exactly-once sink of the exploration: a real {@link TwoPhaseCommitSink} over the in-memory
 * {@link TransactionalSystem}, every call through its process's {@link ProcessGate}. Transaction ids
 * carry the process, subtask, incarnation and attempt, so no later attempt's transaction can be
 * reached through an older handle, and `finishRecoveringTransactions` finds what older attempts of the
 * recovered subtasks left open or prepared (as Kafka's ListTransactions by prefix or PostgreSQL's
 * `pg_prepared_xacts` would) and aborts it.
 *
 * @example
 * ```ts
 * job.fromSource(source).sinkTo(() => new ModelSink(system, gate, "p1"), { uid: "out" });
 * ```
 */
export class ModelSink extends TwoPhaseCommitSink<number, ModelTransaction> {
  /** Checkpoint ids the runtime told this instance were aborted. */
  readonly abortedCheckpointIds: number[] = [];
  private sequence = 0;

  /** Every transaction this instance (one attempt of one subtask) began. */
  private readonly began: string[] = [];
  private closing: Promise<void> | undefined;
  private readonly gate: ProcessGate;
  private readonly processName: string;

  constructor(
    private readonly system: TransactionalSystem,
    private readonly host: SinkHost,
  ) {
    super({ name: "ModelSink", commitRetry: { maxAttempts: 4, initialDelay: 1, maxDelay: 4 } });
    this.gate = host.gate;
    this.processName = host.name;
  }

  /** The attempt ended: closes as the runtime does, then tells the host what this attempt began. */
  override close(): Promise<void> {
    // A second close (the runtime may close twice) returns at once in the base class: report once,
    // when the first one has finished.
    this.closing ??= (async () => {
      await super.close();
      await this.gate.whenOpen();
      this.host.attemptEnded?.([...this.began]);
    })();
    return this.closing;
  }

  override notifyCheckpointAborted(
    checkpointId: number,
  ): ReturnType<TwoPhaseCommitSink<number, ModelTransaction>["notifyCheckpointAborted"]> {
    this.abortedCheckpointIds.push(checkpointId);
    return super.notifyCheckpointAborted(checkpointId);
  }

  protected beginTransaction(): Promise<ModelTransaction> {
    const context = this.runtimeContext;
    const owner: TransactionOwner = {
      subtaskIndex: context.subtaskIndex,
      parallelism: context.parallelism,
      incarnation: context.incarnation,
      attempt: context.attemptNumber,
      process: this.processName,
      generation: this.host.generation ?? 0,
    };
    const id = `${this.processName}/s${owner.subtaskIndex}of${owner.parallelism}/i${owner.incarnation}/a${owner.attempt}/t${++this.sequence}`;
    this.began.push(id);
    return this.gate.pass(() => {
      this.system.begin(id, owner);
      return { id, owner };
    });
  }

  protected invoke(transaction: ModelTransaction, value: number, _context: SinkContext): Promise<void> {
    return this.gate.pass(() => this.system.write(transaction.id, [value]));
  }

  protected override invokeBatch(
    transaction: ModelTransaction,
    values: readonly number[],
    _context: SinkContext,
  ): Promise<void> {
    return this.gate.pass(() => this.system.write(transaction.id, values));
  }

  protected preCommit(transaction: ModelTransaction, _checkpoint: FunctionSnapshotContext): Promise<void> {
    return this.gate.pass(() => this.system.prepare(transaction.id));
  }

  protected commit(transaction: ModelTransaction): Promise<void> {
    return this.gate.pass(() => this.system.commit(transaction.id));
  }

  protected abort(transaction: ModelTransaction): Promise<void> {
    return this.gate.pass(() => this.system.abort(transaction.id));
  }

  // What older attempts of the subtasks this one recovers left open or prepared: nobody else aborts it.
  protected override finishRecoveringTransactions(): Promise<void> {
    const { subtaskIndex, parallelism, incarnation, attemptNumber } = this.runtimeContext;
    return this.gate.pass(() => {
      for (const transaction of this.system.unfinished()) {
        const { owner } = transaction;
        if (owner.subtaskIndex % parallelism !== subtaskIndex) continue;
        const generation = this.host.generation ?? 0;
        // An earlier run (before a fresh start or a storage reset) is older whatever its incarnations.
        const older =
          owner.generation !== generation
            ? owner.generation < generation
            : incarnation > 0
              ? owner.incarnation < incarnation
              : owner.process !== this.processName || owner.attempt < attemptNumber;
        if (older) this.system.abort(transaction.id);
      }
    });
  }

  protected override describeTransaction(transaction: ModelTransaction): string {
    return transaction.id;
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    return error instanceof UncommittableTransactionError ? "fatal" : "retry";
  }
}
