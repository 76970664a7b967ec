import { setTimeout as sleep } from "node:timers/promises";
import { TransactionError } from "../errors/onceflow-error.js";
import type { Logger } from "../observability/logger.js";
import type { TransactionHolder } from "./transaction-state.js";
import type { CommitErrorClassification, CommitRetryOptions } from "./two-phase-commit-options.js";

/**
 * How a two-phase-commit sink treats its transactions' age: the external system's transaction
 * timeout, the share of it past which a phase warns, and whether a transaction the system aborted
 * after its timeout is given up (its data lost, logged) instead of failing the job.
 */
export interface TransactionTimeoutPolicy {
  readonly timeout: number | undefined;
  readonly warningRatio: number;
  readonly ignoreFailuresAfterTimeout: boolean;
}

/**
 * What {@link commitWithRetry} needs of its sink: the protocol lives in `TwoPhaseCommitSink`, the
 * commit's retries and the meaning of each failure here.
 */
export interface TransactionCommitter<TXN> {
  /** The sink's name, for messages. */
  readonly sinkName: string;
  readonly log: Logger;
  readonly retry: Required<CommitRetryOptions>;
  readonly timeoutPolicy: TransactionTimeoutPolicy;
  /** `commit`, or `recoverAndCommit` when `recovering`. */
  commit(transaction: TXN, recovering: boolean): Promise<void> | void;
  classify(error: unknown, transaction: TXN): CommitErrorClassification | Promise<CommitErrorClassification>;
  describe(transaction: TXN): string;
  /** A failed commit is about to be retried (the retries metric). */
  onRetry(): void;
}

/**
 * Commits one pending transaction, retrying with exponential backoff while its failures classify
 * as `retry`. Returns `"dropped"` only for a transaction the external system aborted after its
 * timeout when the policy ignores those; every other failure throws a `TransactionError` (the
 * transaction stays pending, in every later checkpoint).
 */
export async function commitWithRetry<TXN>(
  committer: TransactionCommitter<TXN>,
  holder: TransactionHolder<TXN>,
  recovering: boolean,
): Promise<"committed" | "dropped"> {
  const { checkpointId, transaction } = holder;
  const { sinkName, log, retry, timeoutPolicy } = committer;
  warnIfNearTimeout(committer, holder, checkpointId, recovering ? "recover-and-commit" : "commit");
  let delay = retry.initialDelay;
  for (let attempt = 1; ; attempt++) {
    try {
      await committer.commit(transaction, recovering);
      return "committed";
    } catch (error) {
      const classification = await committer.classify(error, transaction);
      const described = committer.describe(transaction);
      const facts = { checkpointId, transactionId: described, cause: error };
      const reason = error instanceof Error ? error.message : String(error);
      switch (classification) {
        case "fenced":
          // Told apart by when it happens (Flink's users cannot tell these cases apart).
          throw new TransactionError(
            "TRANSACTION_FENCED",
            recovering
              ? `${sinkName}: transaction ${described} of the restored checkpoint ${checkpointId} cannot be committed: its id has been used by a newer transaction since. Either a checkpoint older than the job's latest was restored (restore the latest one — the older one's output is already committed or lost), or another instance of this job, or another sink with the same ids, is running (stop it; make ids unique per sink). Cause: ${reason}`
              : `${sinkName}: transaction ${described} of checkpoint ${checkpointId} was fenced while this process was running: a newer process of this job took its ids over, so this one is a zombie and must stop (the newer one recovers the data), or another job or sink uses the same ids (make them unique). Cause: ${reason}`,
            facts,
          );
        case "timed-out": {
          const age = Date.now() - holder.startedAt;
          const timeout = timeoutPolicy.timeout;
          if (timeoutPolicy.ignoreFailuresAfterTimeout && timeout !== undefined && age > timeout) {
            log.error(
              { checkpointId, transaction: described, ageMs: age, transactionTimeoutMs: timeout, err: error },
              `DATA LOST: the external system aborted transaction ${described} of checkpoint ${checkpointId} after its timeout; the data of checkpoint ${checkpointId} is lost and is skipped because ignoreFailuresAfterTransactionTimeout is set`,
            );
            return "dropped";
          }
          throw new TransactionError(
            "TRANSACTION_TIMED_OUT",
            `${sinkName}: the external system aborted transaction ${described} of checkpoint ${checkpointId} after its transaction timeout (age ${age} ms${timeout === undefined ? "" : `, transactionTimeout ${timeout} ms`}): the data of checkpoint ${checkpointId} is lost. Raise the external system's transaction timeout above the longest expected downtime, or set ignoreFailuresAfterTransactionTimeout to accept the loss and go on. Cause: ${reason}`,
            facts,
          );
        }
        case "fatal":
          throw new TransactionError(
            "COMMIT_FAILED",
            `${sinkName}: commit of transaction ${described} of checkpoint ${checkpointId} failed with an error that retrying cannot fix: ${reason}. The transaction is still pending: it is kept in every later checkpoint and committed again after a restart.`,
            facts,
          );
        default: {
          if (attempt >= retry.maxAttempts) {
            throw new TransactionError(
              "COMMIT_FAILED",
              `${sinkName}: commit of transaction ${described} of checkpoint ${checkpointId} failed ${attempt} time(s): ${reason}. The transaction is still pending: it is kept in every later checkpoint and committed again after a restart.`,
              facts,
            );
          }
          committer.onRetry();
          log.warn(
            { checkpointId, transaction: described, attempt, retryInMs: delay, err: error },
            "commit failed; retrying",
          );
          await sleep(delay);
          delay = Math.min(delay * retry.multiplier, retry.maxDelay);
        }
      }
    }
  }
}

/**
 * Warns when a transaction at `phase` is older than the policy's warning share of the transaction
 * timeout: past the timeout the external system aborts it and its checkpoint's data is lost.
 */
export function warnIfNearTimeout<TXN>(
  committer: Pick<TransactionCommitter<TXN>, "log" | "timeoutPolicy" | "describe">,
  holder: TransactionHolder<TXN>,
  checkpointId: number,
  phase: string,
): void {
  const { timeout, warningRatio } = committer.timeoutPolicy;
  if (timeout === undefined) return;
  const age = Date.now() - holder.startedAt;
  if (age <= timeout * warningRatio) return;
  committer.log.warn(
    {
      checkpointId,
      transaction: committer.describe(holder.transaction),
      ageMs: age,
      transactionTimeoutMs: timeout,
      phase,
    },
    `transaction is ${Math.round((age / timeout) * 100)}% of the transaction timeout old at ${phase}: if it passes the timeout the external system aborts it and the data of checkpoint ${checkpointId} is lost. Checkpoint more often or raise the timeout.`,
  );
}
