import type { TwoPhaseCommitSink } from "@onceflow/core";

/**
 * What one case of the contract suite runs against: a fresh destination of its own. Name the
 * topic, table or directory of the case after `id`, so cases never see each other's output.
 *
 * @example
 * ```ts
 * const topicOf = (scope: SinkContractScope) => `contract-${scope.id}`;
 * ```
 */
export interface SinkContractScope {
  /** Unique per case and run: lowercase letters, digits and `_`, starting with a letter (fits topic, table and file names). */
  readonly id: string;
  /** The case's stable id, e.g. `kill-after-checkpoint-stored`. */
  readonly caseId: string;
  /** Subtask index of the sink being created (0, or 0/1 in the two-subtask case). */
  readonly subtaskIndex: number;
  /** Parallelism of the sink being created. */
  readonly parallelism: number;
}

/** The default largest transaction handle a checkpoint may hold: 64 KiB. */
export const DEFAULT_MAX_TRANSACTION_HANDLE_BYTES = 64 * 1024;

/**
 * How to run the contract suite on a sink: `describeTwoPhaseCommitSink` (`@onceflow/testkit/vitest`) and
 * {@link twoPhaseCommitSinkContractCases} take it. `S` is the sink's own class, so `kill` gets it
 * without a cast (inferred from `createSink`, or given: `TwoPhaseCommitSinkContract<Row, MySink>`).
 *
 * @example
 * ```ts
 * const contract: TwoPhaseCommitSinkContract<string, FileSink<string>> = {
 *   name: "FileSink",
 *   createSink: (scope) => new FileSink<string>({ directory: join(root, scope.id) }),
 *   readCommitted: (scope) => readCommittedFiles<string>(join(root, scope.id)),
 *   createRecord: (index) => `record-${index}`,
 *   lingering: async (scope) => (await readdir(join(root, scope.id, ".staging")).catch(() => [])),
 * };
 * ```
 */
export interface TwoPhaseCommitSinkContract<
  IN,
  S extends TwoPhaseCommitSink<IN, unknown> = TwoPhaseCommitSink<IN, unknown>,
> {
  /** Names the `describe` block and the errors. */
  readonly name: string;
  /**
   * A new sink instance writing to the case's destination. Called once per (simulated) process
   * start: a case that kills a sink restores a new instance from the last checkpoint. Faults are
   * injected around the instance's steps by the suite ({@link injectFaults}); the sink needs no hooks.
   */
  createSink(scope: SinkContractScope): S | Promise<S>;
  /**
   * Everything a reader of the destination sees as committed right now, independently of the sink
   * (a `read_committed` consumer, a fresh SQL connection, a directory listing), in any order.
   * In the two-subtask case both subtasks' output.
   */
  readCommitted(scope: SinkContractScope): Promise<readonly IN[]> | readonly IN[];
  /** The `index`-th input record (unique per index). */
  createRecord(index: number): IN;
  /** How committed records are compared with the input (default: `JSON.stringify`). */
  identify?(value: IN): string;
  /** Creates the case's destination (topic, table) before its first sink. */
  setup?(scope: SinkContractScope): Promise<void> | void;
  /** Removes the case's destination after it (also when it failed). */
  teardown?(scope: SinkContractScope): Promise<void> | void;
  /**
   * Releases what a killed instance holds the way a SIGKILL would — close its sockets or file
   * handles — WITHOUT aborting or committing anything. Needed when an abandoned instance would
   * otherwise keep a lock or session the next instance waits on (a PostgreSQL transaction keeps
   * its row locks until its connection drops). Default: nothing (the instance is just dropped).
   * Every author step of a killed instance throws, so the hook may also call `close()` to drop
   * process-local registrations or timers: its abort is not run, nothing reaches the destination.
   */
  kill?(sink: S, scope: SinkContractScope): Promise<void> | void;
  /**
   * Lists the external state the sink left behind in the case's destination — staged data,
   * prepared transactions, open transactions, staging tables or files, locks — one readable name
   * each (a gid, a table, a transactional id). Called after each case's last step, once every
   * instance was closed or its leftovers recovered by the next one (before `teardown`): the case
   * fails, naming them, unless the list is empty. Without it, leaks go unnoticed.
   */
  lingering?(scope: SinkContractScope): Promise<readonly string[]> | readonly string[];
  /**
   * The largest transaction handle a checkpoint may hold, in bytes, as the sink's
   * `transactionSerializer` writes it (default 64 KiB). Every checkpoint the suite takes is checked:
   * a handle must carry ids and positions, not the records (stage those in the external system).
   */
  readonly maxTransactionHandleBytes?: number;
  /**
   * The destination overwrites by key (an upsert table, a key-value store): replaying records
   * produces no duplicate. Then restoring an older checkpoint must also end with exactly the input;
   * otherwise duplicates of what later checkpoints committed are expected there (see the case).
   */
  readonly idempotentByKey?: boolean;
  /** Records written between two checkpoints (default 4). */
  readonly recordsPerCheckpoint?: number;
  /** Cases not to run, with the reason (shown as skipped). Prefer fixing the sink. */
  readonly skip?: Readonly<Record<string, string>>;
  /** Time limit of each case in ms (default 60 000). */
  readonly timeout?: number;
}
