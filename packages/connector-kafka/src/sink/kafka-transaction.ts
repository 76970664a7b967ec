import type { DeliveryGuarantee } from "./kafka-sink-options.js";

/**
 * The handle of one checkpoint's output, as stored in the checkpoint. For exactly-once it carries
 * what another process needs to commit it: transactional id, producer id and epoch. A transaction
 * that received no record has no transactional id (`empty`): nothing was begun at the broker.
 *
 * @example
 * ```ts
 * const pending: KafkaTransaction = { guarantee: "exactly-once", checkpointId: 7, records: 120,
 *   transactionalId: "orders-out-0-12-2", producerId: "4001", producerEpoch: 12, startedAt: Date.now(),
 *   poolSize: 5 };
 * ```
 */
export interface KafkaTransaction {
  readonly guarantee: DeliveryGuarantee;
  /** The checkpoint that pre-committed it (0 while open). */
  checkpointId: number;
  /** Records written into it. */
  records: number;
  transactionalId?: string;
  producerId?: string;
  producerEpoch?: number;
  /** When the broker's transaction began (its first record), ms since the epoch. */
  startedAt?: number;
  /** The pool size when it was written, to find every id to fence after the pool shrank. */
  poolSize: number;
}
