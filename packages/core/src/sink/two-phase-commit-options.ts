import { ConfigurationError } from "../errors/onceflow-error.js";
import type { TypeSerializer } from "../state/serializer.js";
import type { TransactionTimeoutPolicy } from "./transaction-commit.js";

/**
 * What a failed commit means, as told by {@link TwoPhaseCommitSink.classifyCommitError}:
 *
 * - `retry`: maybe transient (network, broker busy): retry with backoff.
 * - `timed-out`: the external system aborted the pre-committed transaction after its timeout; its
 *   data is lost.
 * - `fenced`: another writer took the transaction over (a newer process, or another job sharing ids).
 * - `fatal`: retrying cannot help; fail now (the transaction stays pending).
 *
 * @example
 * ```ts
 * protected override classifyCommitError(error: unknown): CommitErrorClassification {
 *   return isProducerFenced(error) ? "fenced" : "retry";
 * }
 * ```
 */
export type CommitErrorClassification = "retry" | "timed-out" | "fenced" | "fatal";

/**
 * Exponential backoff for commits: attempt `n` (from 1) waits
 * `min(initialDelay × multiplier^(n-1), maxDelay)` ms before attempt `n + 1`.
 *
 * @example
 * ```ts
 * const commitRetry: CommitRetryOptions = { maxAttempts: 8, initialDelay: 200, maxDelay: 30_000, multiplier: 2 };
 * ```
 */
export interface CommitRetryOptions {
  /** Attempts in all, the first included (default 5). */
  readonly maxAttempts?: number;
  /** Delay before the first retry, in ms (default 100). */
  readonly initialDelay?: number;
  /** Longest delay between attempts, in ms (default 10 000). */
  readonly maxDelay?: number;
  /** Growth of the delay from one retry to the next (default 2). */
  readonly multiplier?: number;
}

/**
 * Settings of a {@link TwoPhaseCommitSink}.
 *
 * @example
 * ```ts
 * super({ name: "orders-kafka", transactionTimeout: 15 * 60_000, commitRetry: { maxAttempts: 10 } });
 * ```
 */
export interface TwoPhaseCommitSinkOptions<TXN> {
  /** Shown in logs and errors (default: the class name). */
  readonly name?: string;
  /**
   * How transaction handles are stored in checkpoints. Defaults to the structured-clone serializer,
   * which fits plain objects; a handle must carry everything needed to commit or abort it from
   * another process.
   */
  readonly transactionSerializer?: TypeSerializer<TXN>;
  /**
   * The external system's transaction timeout in ms (for example Kafka's `transaction.timeout.ms`).
   * Enables the age warnings and the `ignoreFailuresAfterTransactionTimeout` opt-in.
   */
  readonly transactionTimeout?: number;
  /** Warn when a transaction is older than this share of `transactionTimeout` at pre-commit or commit (default 0.8). */
  readonly transactionTimeoutWarningRatio?: number;
  /**
   * When a commit fails because the external system timed the transaction out, and the transaction
   * is older than `transactionTimeout`, log the data loss as an error and go on instead of failing
   * (default `false`: fail with a `TRANSACTION_TIMED_OUT` error). Requires `transactionTimeout`.
   * Only for pipelines that prefer losing a checkpoint's output to stopping.
   */
  readonly ignoreFailuresAfterTransactionTimeout?: boolean;
  readonly commitRetry?: CommitRetryOptions;
  /**
   * Commit in the background (default `false`): `notifyCheckpointComplete` starts the commits and
   * returns, so records keep flowing while a slow commit (a large move, a remote call) runs.
   * Exactly-once is unchanged: a transaction stays pending — in every checkpoint taken meanwhile —
   * until its commit has finished, so a crash at any moment recovers it. One commit runs at a time,
   * in checkpoint order; the next notification waits for the previous one, which bounds the backlog.
   * A commit that fails for good fails the job at the sink's next call. The final checkpoint (end
   * of input or a stop) commits inline, so a job ends only once its output is committed, and
   * `close()` waits for a commit still running. `commit` must then tolerate running while
   * `invoke`/`preCommit` work on the next transaction.
   */
  readonly backgroundCommits?: boolean;
}

/**
 * A pre-committed transaction waiting for its checkpoint to complete.
 *
 * @example
 * ```ts
 * for (const { checkpointId, transaction } of sink.pendingTransactions()) console.log(checkpointId, transaction);
 * ```
 */
export interface PendingTransaction<TXN> {
  /** The checkpoint that pre-committed the transaction; it commits when this checkpoint (or a later one) completes. */
  readonly checkpointId: number;
  readonly transaction: TXN;
  /** When the transaction began (ms since the epoch). */
  readonly startedAt: number;
}

const retryDefaults = { maxAttempts: 5, initialDelay: 100, maxDelay: 10_000, multiplier: 2 } as const;

/**
 * The commit retry settings with the defaults filled in, checked.
 *
 * @throws ConfigurationError `CONFIGURATION` naming the setting that is out of range.
 */
export function validateCommitRetry(options: CommitRetryOptions): Required<CommitRetryOptions> {
  const merged = { ...retryDefaults, ...stripUndefined(options) };
  if (!(Number.isInteger(merged.maxAttempts) && merged.maxAttempts >= 1)) {
    throw new ConfigurationError(
      "commitRetry.maxAttempts",
      `must be a whole number of at least 1, got ${merged.maxAttempts}`,
    );
  }
  if (!(Number.isFinite(merged.initialDelay) && merged.initialDelay >= 0)) {
    throw new ConfigurationError(
      "commitRetry.initialDelay",
      `must be 0 ms or more, got ${merged.initialDelay}`,
    );
  }
  if (!(Number.isFinite(merged.maxDelay) && merged.maxDelay >= merged.initialDelay)) {
    throw new ConfigurationError(
      "commitRetry.maxDelay",
      `must be at least commitRetry.initialDelay (${merged.initialDelay} ms), got ${merged.maxDelay}`,
    );
  }
  if (!(Number.isFinite(merged.multiplier) && merged.multiplier >= 1)) {
    throw new ConfigurationError("commitRetry.multiplier", `must be at least 1, got ${merged.multiplier}`);
  }
  return merged;
}

/**
 * The transaction-timeout options of a sink, checked: `transactionTimeout` > 0 ms,
 * `transactionTimeoutWarningRatio` in (0, 1] (default 0.8), and
 * `ignoreFailuresAfterTransactionTimeout` only together with `transactionTimeout`.
 */
export function validateTransactionTimeout(
  options: Pick<
    TwoPhaseCommitSinkOptions<unknown>,
    "transactionTimeout" | "transactionTimeoutWarningRatio" | "ignoreFailuresAfterTransactionTimeout"
  >,
): TransactionTimeoutPolicy {
  const timeout = options.transactionTimeout;
  if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) {
    throw new ConfigurationError(
      "transactionTimeout",
      `must be a number of ms greater than 0, got ${timeout}`,
    );
  }
  const warningRatio = options.transactionTimeoutWarningRatio ?? 0.8;
  if (!(Number.isFinite(warningRatio) && warningRatio > 0 && warningRatio <= 1)) {
    throw new ConfigurationError(
      "transactionTimeoutWarningRatio",
      `must be greater than 0 and at most 1, got ${warningRatio}`,
    );
  }
  const ignoreFailuresAfterTimeout = options.ignoreFailuresAfterTransactionTimeout ?? false;
  if (ignoreFailuresAfterTimeout && timeout === undefined) {
    throw new ConfigurationError(
      "ignoreFailuresAfterTransactionTimeout",
      "needs transactionTimeout: set it to the external system's transaction timeout, so only transactions older than that are given up",
    );
  }
  return { timeout, warningRatio, ignoreFailuresAfterTimeout };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, each]) => each !== undefined)) as Partial<T>;
}
