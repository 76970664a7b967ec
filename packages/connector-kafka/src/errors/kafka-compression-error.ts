import { OnceflowError } from "@onceflow/core";

/**
 * What {@link KafkaCompressionError} says about the batch it could not decompress.
 *
 * @example
 * ```ts
 * const details: KafkaCompressionDetails = { topic: "orders", partition: 3, offset: "1200", codec: "zstd", reason: "corrupt" };
 * ```
 */
// A type, not an interface: error details must fit OnceflowError's Record<string, unknown>.
export type KafkaCompressionDetails = {
  /** The topic of the batch. */
  readonly topic: string;
  /** Its partition. */
  readonly partition: number;
  /** The base offset of the batch (its first record), as a decimal string. */
  readonly offset: string;
  /** The codec the batch names: `gzip`, `snappy`, `lz4`, `zstd`, or `unknown (N)` for an id Kafka does not define. */
  readonly codec: string;
  /**
   * `unavailable`: the codec's package is not installed or does not load on this platform, or the
   * codec is unknown; `corrupt`: the codec failed on the batch's bytes.
   */
  readonly reason: "unavailable" | "corrupt";
};

/**
 * A record batch of the source could not be decompressed: its codec is not available here (code
 * `CONFIGURATION`: install the package the message names) or failed on the batch's bytes (code
 * `RECORD_REJECTED`: the same bytes fail on every read). Both codes are permanent: the job stops
 * at once instead of restarting in a loop. `details` name the topic, partition and the batch's
 * base offset. The connector ships gzip, snappy, lz4 and zstd; a batch whose checksum holds but
 * whose compressed bytes do not decode was written broken.
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   let cause: unknown = error;
 *   while (cause instanceof Error && !(cause instanceof KafkaCompressionError)) cause = cause.cause;
 *   if (cause instanceof KafkaCompressionError) console.error(cause.details.topic, cause.details.offset);
 * }
 * ```
 */
export class KafkaCompressionError extends OnceflowError {
  declare readonly details: KafkaCompressionDetails;
  /** Fetching the same bytes again cannot help: the source's reader fails instead of retrying. */
  readonly retriable = false as const;
  constructor(message: string, details: KafkaCompressionDetails, options: { cause?: unknown } = {}) {
    super(details.reason === "unavailable" ? "CONFIGURATION" : "RECORD_REJECTED", message, {
      cause: options.cause,
      details,
    });
  }
}
