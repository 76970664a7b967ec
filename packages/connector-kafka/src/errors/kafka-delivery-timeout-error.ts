import { OnceflowError } from "@onceflow/core";

/**
 * What {@link KafkaDeliveryTimeoutError} says about the records that timed out.
 *
 * @example
 * ```ts
 * const details: KafkaDeliveryTimeoutDetails = { topic: "orders", partition: 3, records: 120, attempts: 9, deliveryTimeoutMs: 120_000 };
 * ```
 */
// A type, not an interface: error details must fit OnceflowError's Record<string, unknown>.
export type KafkaDeliveryTimeoutDetails = {
  readonly topic: string;
  readonly partition: number;
  /** Records of the batch that was not acknowledged. */
  readonly records: number;
  /** Produce requests tried for it. */
  readonly attempts: number;
  readonly deliveryTimeoutMs: number;
};

/**
 * Records were not acknowledged within the sink's `deliveryTimeoutMs` (the Java producer's
 * `delivery.timeout.ms`), resends included: the partition's leader stayed unreachable or kept
 * failing. The code is `SERVICE_UNAVAILABLE`, so the job's restart strategy restarts it from its
 * last checkpoint (a transaction is aborted; at-least-once sends the records again). `cause` is the
 * last error of the resends.
 *
 * @example
 * ```ts
 * const sink = new KafkaSink<string>({ brokers, topic: "orders", deliveryTimeoutMs: 60_000 });
 * // … a job fails with it (in its cause chain) when a broker stays down for a minute:
 * // error.details → { topic: "orders", partition: 0, records: 12, attempts: 31, deliveryTimeoutMs: 60000 }
 * ```
 */
export class KafkaDeliveryTimeoutError extends OnceflowError {
  declare readonly details: KafkaDeliveryTimeoutDetails;
  constructor(message: string, details: KafkaDeliveryTimeoutDetails, options: { cause?: unknown } = {}) {
    super("SERVICE_UNAVAILABLE", message, { cause: options.cause, details });
  }
}
