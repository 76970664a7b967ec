import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import type { SinkContext } from "../sink.js";
import type { CommitErrorClassification, TwoPhaseCommitSinkOptions } from "../two-phase-commit-options.js";
import { TwoPhaseCommitSink } from "../two-phase-commit-sink.js";

/**
 * The handle of a {@link RecordingSink} transaction: plain data, so it survives a checkpoint.
 *
 * @example
 * ```ts
 * const transaction: RecordedTransaction = { id: "t1", values: ["a"] };
 * ```
 */
export interface RecordedTransaction {
  readonly id: string;
  readonly values: string[];
}

/**
 * What every {@link RecordingSink} instance of one test shares, like an external system would:
 * the log of calls across instances (and restarts), the committed values, and failure injection.
 *
 * @example
 * ```ts
 * const journal = new SinkJournal();
 * journal.failCommit("t1", 2); // the first two commit attempts of t1 throw
 * ```
 */
export class SinkJournal {
  /** One line per call, e.g. `begin t2 after 1`, `commit t1`, `recoverAndAbort t2`. */
  readonly calls: string[] = [];
  /** Values of committed transactions, in commit order; a transaction counts once however often commit runs. */
  readonly committed: string[] = [];
  readonly committedIds = new Set<string>();
  /** What `classifyCommitError` answers. */
  classification: CommitErrorClassification = "retry";
  /** When true, `abort` throws. */
  abortFails = false;
  private nextId = 1;
  private readonly commitFailures = new Map<string, number>();

  /** The next transaction id: t1, t2, … */
  newId(): string {
    return `t${this.nextId++}`;
  }

  /** The next `times` commit attempts of `id` throw (`Infinity`: every one). */
  failCommit(id: string, times: number): void {
    this.commitFailures.set(id, times);
  }

  /** Throws when a failure is planned for `id`, else records the commit once. */
  applyCommit(transaction: RecordedTransaction): void {
    const failures = this.commitFailures.get(transaction.id) ?? 0;
    if (failures > 0) {
      this.commitFailures.set(transaction.id, failures - 1);
      throw new Error(`injected commit failure of ${transaction.id}`);
    }
    if (this.committedIds.has(transaction.id)) return;
    this.committedIds.add(transaction.id);
    this.committed.push(...transaction.values);
  }

  /** The calls whose first word is one of `kinds`. */
  callsOf(...kinds: string[]): string[] {
    return this.calls.filter((call) => kinds.includes(call.split(" ")[0] ?? ""));
  }
}

/**
 * A {@link TwoPhaseCommitSink} over strings that writes every protocol call into a
 * {@link SinkJournal}, for tests of the protocol.
 *
 * @example
 * ```ts
 * const journal = new SinkJournal();
 * const harness = new SinkTestHarness(new RecordingSink(journal));
 * ```
 */
export class RecordingSink extends TwoPhaseCommitSink<string, RecordedTransaction> {
  readonly journal: SinkJournal;

  constructor(journal: SinkJournal, options: TwoPhaseCommitSinkOptions<RecordedTransaction> = {}) {
    super(options);
    this.journal = journal;
  }

  protected beginTransaction(): RecordedTransaction {
    const transaction = { id: this.journal.newId(), values: [] };
    this.journal.calls.push(`begin ${transaction.id} after ${this.lastCheckpointId}`);
    return transaction;
  }

  protected invoke(transaction: RecordedTransaction, value: string, _context: SinkContext): void {
    this.journal.calls.push(`invoke ${transaction.id} ${value}`);
    transaction.values.push(value);
  }

  protected preCommit(transaction: RecordedTransaction, checkpoint: FunctionSnapshotContext): void {
    this.journal.calls.push(`preCommit ${transaction.id} at ${checkpoint.checkpointId}`);
  }

  protected commit(transaction: RecordedTransaction): void {
    this.journal.calls.push(`commit ${transaction.id}`);
    this.journal.applyCommit(transaction);
  }

  protected override recoverAndCommit(transaction: RecordedTransaction): void {
    this.journal.calls.push(`recoverAndCommit ${transaction.id}`);
    this.journal.applyCommit(transaction);
  }

  protected abort(transaction: RecordedTransaction): void {
    this.journal.calls.push(`abort ${transaction.id}`);
    if (this.journal.abortFails) throw new Error(`injected abort failure of ${transaction.id}`);
  }

  protected override recoverAndAbort(transaction: RecordedTransaction): void {
    this.journal.calls.push(`recoverAndAbort ${transaction.id}`);
  }

  protected override finishRecoveringTransactions(): void {
    this.journal.calls.push(`finishRecovering after ${this.lastCheckpointId}`);
  }

  protected override describeTransaction(transaction: RecordedTransaction): string {
    return transaction.id;
  }

  protected override classifyCommitError(): CommitErrorClassification {
    return this.journal.classification;
  }
}
