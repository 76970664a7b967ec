/**
 * A sealed record batch of the connector's produce path, and what is done to one after it is
 * sealed: Kafka's sequence arithmetic, the split of a batch the topic refused as too large, and
 * the decoding of its records back into messages for an error report.
 *
 * A refused batch is split as the Java producer does: its records are re-encoded into two halves
 * that take the same sequence range (the first half the batch's base sequence, the second the
 * rest), so the batches queued behind it keep theirs. The refused batch was not appended and
 * nothing later of its partition is in flight, so the broker expects exactly the first half next.
 * The halves are transactional when the refused batch was, and compressed with its codec.
 */

import { codecOfId } from "../protocol/compression/codecs.js";
import type { CompressionCodec } from "../protocol/compression/compression-codec.js";
import { compressRecordBatch } from "../protocol/compression/record-batch-compression.js";
import { type EncodedRecord, HEADER_LIST, recordsOfBatch } from "../protocol/record-batch-decoder.js";
import { type BatchProducer, encodeRecordBatch } from "../protocol/record-batch-encoder.js";
import { ATTRIBUTES_OFFSET, COMPRESSION_MASK, TRANSACTIONAL_FLAG } from "../protocol/record-batch-layout.js";
import type { ProducerMessage } from "./producer-message.js";

/**
 * A batch waiting for its acknowledgement: its bytes only. The records it was encoded from are not
 * kept (they held the sink's input, and through it the fetched buffers, for a round trip); the
 * rare path that needs them again decodes them from the bytes (`recordsOfBatch`).
 */
export interface SealedBatch {
  readonly bytes: Buffer;
  /** The pooled buffer `bytes` lie in, given back once the batch is acknowledged. */
  readonly slab: Buffer | undefined;
  readonly count: number;
  readonly baseSequence: number;
  attempts: number;
  /** When its first record was written (`performance.now()`), for the delivery timeout. */
  createdAt?: number;
}

/** The producer a batch is written for: every batch of a producer carries it. */
export type ProducerIdentity = Pick<BatchProducer, "producerId" | "producerEpoch">;

const MAX_SEQUENCE = 0x7fffffff;

/**
 * Kafka's sequence arithmetic: sequences wrap to 0 after 2^31 - 1.
 *
 * @example
 * ```ts
 * nextSequence(10, 5); // 15
 * nextSequence(0x7fffffff, 1); // 0
 * ```
 */
export function nextSequence(sequence: number, increment: number): number {
  return sequence > MAX_SEQUENCE - increment
    ? increment - (MAX_SEQUENCE - sequence) - 1
    : sequence + increment;
}

/**
 * The refused batch's records in two batches of half each, with their timestamps and the same
 * sequence range: the first from the refused batch's base sequence, the second right after it.
 * The refused batch must hold at least two records.
 *
 * @example
 * ```ts
 * const [first, second] = splitInHalves(refused, { producerId, producerEpoch });
 * lane.queue.splice(0, 1, first, second);
 * ```
 */
export function splitInHalves(refused: SealedBatch, producer: ProducerIdentity): [SealedBatch, SealedBatch] {
  const records = recordsOfBatch(refused.bytes);
  if (records.length < 2) throw new Error("splitInHalves: a batch of one record cannot be split");
  const half = Math.ceil(records.length / 2);
  const attributes = refused.bytes.readInt16BE(ATTRIBUTES_OFFSET);
  const transactional = (attributes & TRANSACTIONAL_FLAG) !== 0;
  const batch = { ...producer, transactional, codec: codecOfId(attributes & COMPRESSION_MASK) };
  return [
    encode(records.slice(0, half), refused.baseSequence, batch),
    encode(records.slice(half), nextSequence(refused.baseSequence, half), batch),
  ];
}

/**
 * The records of a sealed batch as the messages they were sent as (timestamps explicit), for an
 * error that names what failed.
 *
 * @example
 * ```ts
 * const messages = messagesOfBatch(batch.bytes);
 * ```
 */
export function messagesOfBatch(bytes: Buffer): ProducerMessage[] {
  return recordsOfBatch(bytes).map(asMessage);
}

/** `records`, with their timestamps, in a batch of their own from `baseSequence`. */
function encode(
  records: readonly EncodedRecord[],
  baseSequence: number,
  producer: ProducerIdentity & {
    readonly transactional: boolean;
    readonly codec: CompressionCodec | undefined;
  },
): SealedBatch {
  // Every record carries its timestamp: the time of writing is not used.
  const plain = encodeRecordBatch(records.map(asMessage), 0, {
    producerId: producer.producerId,
    producerEpoch: producer.producerEpoch,
    baseSequence,
    transactional: producer.transactional,
  });
  const bytes = producer.codec === undefined ? plain : compressRecordBatch(plain, producer.codec);
  return { bytes, slab: undefined, count: records.length, baseSequence, attempts: 0 };
}

/** A decoded record as the message it was sent as (its timestamp explicit). */
function asMessage(record: EncodedRecord): ProducerMessage {
  return {
    key: record.key,
    value: record.value,
    // In the record's order (names interleaved as written); a null value is Kafka's null again.
    headers: record.headers?.[HEADER_LIST] ?? record.headers,
    timestamp: String(record.timestamp),
  };
}
