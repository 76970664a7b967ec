import { OnceflowError } from "@onceflow/core";
import { kafkaErrorType } from "../internal/kafkajs/internals.js";
import type { ProducerMessage } from "../producer/producer-message.js";
import { isHeaderList } from "../protocol/record-batch-encoder.js";

/**
 * What {@link KafkaRecordRejectedError} says about the refused send.
 *
 * @example
 * ```ts
 * const details: KafkaRecordRejectedDetails = { topic: "orders", brokerError: "MESSAGE_TOO_LARGE", records: 3, largestRecordBytes: 2_000_000 };
 * ```
 */
// A type, not an interface: error details must fit OnceflowError's Record<string, unknown>.
export type KafkaRecordRejectedDetails = {
  /** The topic the records were for. */
  readonly topic: string;
  /**
   * The broker's error, such as `MESSAGE_TOO_LARGE` or `INVALID_RECORD`; `RECORD_TOO_LARGE` (the
   * Java client's name) when the sink refused a record over its `maxRequestSize` before sending it.
   */
  readonly brokerError: string;
  /** How many records the refused request carried for the topic. */
  readonly records: number;
  /** The largest of them: key plus value plus header bytes. */
  readonly largestRecordBytes: number;
};

// Errors a retry cannot fix: the same records are refused again after every restart.
const PERMANENT_PRODUCE_ERRORS: Readonly<Record<string, string>> = {
  MESSAGE_TOO_LARGE:
    "raise the topic's max.message.bytes (and the broker's message.max.bytes) or make the records smaller",
  RECORD_LIST_TOO_LARGE:
    "raise the topic's max.message.bytes (and the broker's message.max.bytes) or make the records smaller",
  INVALID_RECORD:
    "the topic's settings refuse these records (a compacted topic needs a key on every record; check the broker's log for the reason)",
  INVALID_TIMESTAMP:
    "the record timestamps are outside the topic's message.timestamp.difference.max.ms (or before/after bounds); fix the timestamps or the topic setting",
};

/**
 * The broker refused records for good (too large, invalid for the topic, a timestamp out of range).
 * Retrying cannot help, so the code is `RECORD_REJECTED`, which the job treats as permanent: it
 * stops at once instead of restarting in a loop. Nothing is lost or written twice: the open
 * transaction is aborted, and after the data or the topic is fixed a restart resumes from the latest
 * checkpoint.
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   // execute() rejects with JOB_FAILED; the rejection is in its cause chain.
 *   let cause: unknown = error;
 *   while (cause instanceof Error && !(cause instanceof KafkaRecordRejectedError)) cause = cause.cause;
 *   if (cause instanceof KafkaRecordRejectedError) console.error(cause.details.topic, cause.details.brokerError);
 * }
 * ```
 */
export class KafkaRecordRejectedError extends OnceflowError {
  declare readonly details: KafkaRecordRejectedDetails;
  constructor(message: string, details: KafkaRecordRejectedDetails, options: { cause?: unknown } = {}) {
    super("RECORD_REJECTED", message, { cause: options.cause, details });
  }
}

const recordBytes = (message: ProducerMessage): number => {
  let bytes = byteLength(message.key) + byteLength(message.value);
  const headers = message.headers ?? {};
  const entries = isHeaderList(headers) ? headers : Object.entries(headers);
  for (const [name, value] of entries) {
    bytes += Buffer.byteLength(name);
    for (const item of Array.isArray(value) ? value : [value]) bytes += byteLength(item);
  }
  return bytes;
};

function byteLength(value: unknown): number {
  if (value === null || value === undefined) return 0;
  if (Buffer.isBuffer(value)) return value.length;
  return Buffer.byteLength(String(value));
}

/**
 * The error to fail with when a send failed: a {@link KafkaRecordRejectedError} naming the topic,
 * the broker's error and the largest record when the broker refused the records for good, else
 * `undefined` (the error is retriable or not about the records).
 */
export function recordRejection(
  error: unknown,
  sinkName: string,
  topicMessages: ReadonlyArray<{ topic: string; messages: readonly ProducerMessage[] }>,
): KafkaRecordRejectedError | undefined {
  const type = kafkaErrorType(error);
  if (type === "RECORD_TOO_LARGE") return tooLargeForRequest(error, sinkName, topicMessages);
  const advice = type === undefined ? undefined : PERMANENT_PRODUCE_ERRORS[type];
  if (type === undefined || advice === undefined) return undefined;
  // The broker does not say which record; name the topic of the largest one sent.
  let worst: KafkaRecordRejectedDetails | undefined;
  for (const { topic, messages } of topicMessages) {
    const largest = messages.reduce((max, message) => Math.max(max, recordBytes(message)), 0);
    if (worst === undefined || largest > worst.largestRecordBytes) {
      worst = { topic, brokerError: type, records: messages.length, largestRecordBytes: largest };
    }
  }
  const details = worst ?? { topic: "(none)", brokerError: type, records: 0, largestRecordBytes: 0 };
  return new KafkaRecordRejectedError(
    `${sinkName}: the broker refused records for topic '${details.topic}' for good (${type}; ${details.records} records in the request, the largest ${details.largestRecordBytes} bytes): ${advice}. Then restart: the job resumes from its latest checkpoint, and nothing of the refused transaction was committed.`,
    details,
    { cause: error },
  );
}

/** A record the producer refused before sending it: over `maxRequestSize`. */
function tooLargeForRequest(
  error: unknown,
  sinkName: string,
  topicMessages: ReadonlyArray<{ topic: string; messages: readonly ProducerMessage[] }>,
): KafkaRecordRejectedError {
  const { recordBytes: size, maxRequestSize } = error as { recordBytes?: number; maxRequestSize?: number };
  const topic = topicMessages[0]?.topic ?? "(none)";
  return new KafkaRecordRejectedError(
    `${sinkName}: a record for topic '${topic}' is ${size} bytes serialized, larger than maxRequestSize (${maxRequestSize}): raise maxRequestSize (and the topic's max.message.bytes, the broker's message.max.bytes) or make the records smaller. Then restart: the job resumes from its latest checkpoint, and nothing of the refused transaction was committed.`,
    { topic, brokerError: "RECORD_TOO_LARGE", records: 1, largestRecordBytes: size ?? 0 },
    { cause: error },
  );
}
