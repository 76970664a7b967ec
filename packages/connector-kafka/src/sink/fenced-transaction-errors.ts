import { TransactionError } from "@onceflow/core";
import { kafkaErrorType } from "../internal/kafkajs/internals.js";
import type { KafkaTransaction } from "./kafka-transaction.js";
import { TransactionalIdPool } from "./transactional-id-pool.js";

/** What explaining a fenced transaction needs to know of the sink. */
export interface FencedTransactionContext {
  /** The sink's name, which starts the message. */
  readonly sinkName: string;
  /** The sink's `transactionTimeout`: a transaction at least this old was aborted by the broker. */
  readonly timeoutMs: number;
  /** The transaction as the sink describes it (id, producer id, epoch). */
  readonly described: string;
}

/**
 * A write refused for a stale epoch (`INVALID_PRODUCER_EPOCH`, `PRODUCER_FENCED`) as a
 * `TransactionError` coded `TRANSACTION_FENCED` that says who took the id over, or that the broker
 * aborted the transaction for its age; any other error as it is.
 *
 * @example
 * ```ts
 * throw fencedWriteError(error, transaction, { sinkName, timeoutMs, described }, lastCheckpointId + 1);
 * ```
 */
export function fencedWriteError(
  error: unknown,
  transaction: KafkaTransaction,
  context: FencedTransactionContext,
  checkpointId: number,
): unknown {
  if (!isFenced(error)) return error;
  const age = ageOf(transaction);
  const reason =
    age >= context.timeoutMs
      ? `the broker aborted it after transactionTimeout (${context.timeoutMs} ms; it is ${age} ms old). Nothing is lost: it was not pre-committed, and a restart replays it from the last checkpoint. Raise transactionTimeout or checkpoint more often`
      : "another process of this job (a newer instance that recovered), or another sink with the same transactionalIdPrefix, took over its transactional id. Make sure only one instance of the job runs and that prefixes are unique";
  return new TransactionError(
    "TRANSACTION_FENCED",
    `${context.sinkName}: writing to transaction ${context.described} was refused: ${reason}`,
    { checkpointId, transactionId: transaction.transactionalId, cause: error },
  );
}

/**
 * A restored transaction whose commit was refused for a stale epoch, and not for its age, as a
 * `TransactionError` coded `TRANSACTION_FENCED` that says why that happens (the restored checkpoint
 * is not the latest, or another job shares the prefix) and how to get the job going again; any
 * other error as it is.
 *
 * @example
 * ```ts
 * throw fencedRecoveryError(error, transaction, { sinkName, timeoutMs, described },
 *   { prefix, incarnation, restoredCheckpointId });
 * ```
 */
export function fencedRecoveryError(
  error: unknown,
  transaction: KafkaTransaction,
  context: FencedTransactionContext,
  recovery: { readonly prefix: string; readonly incarnation: number; readonly restoredCheckpointId: number },
): unknown {
  if (!isFenced(error) || ageOf(transaction) >= context.timeoutMs) return error;
  const { prefix, incarnation, restoredCheckpointId: restored } = recovery;
  const owner =
    transaction.transactionalId === undefined
      ? undefined
      : TransactionalIdPool.parse(prefix, transaction.transactionalId);
  const ownerText =
    owner?.incarnation === undefined ? "the attempt that wrote it" : `incarnation ${owner.incarnation}`;
  return new TransactionError(
    "TRANSACTION_FENCED",
    `${context.sinkName}: the broker refused to commit ${context.described} of the restored checkpoint ${transaction.checkpointId} (${kafkaErrorType(error)}): a newer producer epoch was started on that id after the checkpoint was taken. Only ${ownerText} uses the id (this is incarnation ${incarnation}), and it reuses it only after a later checkpoint completed; a later attempt fences it only when the checkpoint it restored did not hold this transaction. So checkpoint ${restored} is not the job's latest (or it was declared failed): restart from the latest checkpoint — restore: "latest", or restore: { checkpointId: <the highest id \`onceflow checkpoints list\` shows> } — whose transactions are still committable. If checkpoint ${restored} is the latest one, another job or sink uses transactionalIdPrefix "${prefix}": give each its own.`,
    { checkpointId: transaction.checkpointId, transactionId: transaction.transactionalId, cause: error },
  );
}

function isFenced(error: unknown): boolean {
  const type = kafkaErrorType(error);
  return type === "INVALID_PRODUCER_EPOCH" || type === "PRODUCER_FENCED";
}

function ageOf(transaction: KafkaTransaction): number {
  return transaction.startedAt === undefined ? 0 : Date.now() - transaction.startedAt;
}
