/**
 * Compression of whole record batches (magic 2): the records after the header compressed as one
 * block, the codec's id in the attributes, the CRC-32C over the compressed bytes; and the way
 * back, with the errors that name the batch.
 */
import { KafkaCompressionError } from "../../errors/kafka-compression-error.js";
import { crc32c } from "../crc32c.js";
import {
  ATTRIBUTES_OFFSET,
  COMPRESSION_MASK,
  CRC_OFFSET,
  LENGTH_OFFSET,
  LOG_OVERHEAD,
  RECORD_BATCH_HEADER_BYTES,
} from "../record-batch-layout.js";
import { CodecUnavailableError, codecOfId } from "./codecs.js";
import type { CompressionCodec } from "./compression-codec.js";

/** Where a batch lies, for the errors. */
export interface BatchPosition {
  readonly topic: string;
  readonly partition: number;
  readonly baseOffset: bigint;
}

/**
 * The records of a compressed batch, decompressed: `compressed` is what follows the batch header,
 * `attributes` the batch's attributes.
 *
 * @throws KafkaCompressionError `CONFIGURATION` when the codec is unknown or its package does not
 * load, `RECORD_REJECTED` when it fails on the bytes; both name the batch.
 * @example
 * ```ts
 * const records = decompressRecords(set.subarray(start + 61, end), attributes, { topic, partition, baseOffset });
 * ```
 */
export function decompressRecords(
  compressed: Uint8Array,
  attributes: number,
  position: BatchPosition,
): Buffer {
  const id = attributes & COMPRESSION_MASK;
  const codec = codecOfId(id);
  const where = `the record batch at offset ${position.baseOffset} of ${position.topic}[${position.partition}]`;
  const details = {
    topic: position.topic,
    partition: position.partition,
    offset: String(position.baseOffset),
    codec: codec?.name ?? `unknown (${id})`,
  };
  if (codec === undefined) {
    throw new KafkaCompressionError(
      `${where} names compression codec ${id}, which Kafka does not define (gzip 1, snappy 2, lz4 3, zstd 4): a newer or foreign client wrote it; read the topic with a client that knows the codec`,
      { ...details, reason: "unavailable" },
    );
  }
  try {
    return codec.decompress(compressed);
  } catch (error) {
    if (error instanceof CodecUnavailableError) {
      throw new KafkaCompressionError(
        `${where} is ${codec.name}-compressed, and ${error.message}: reinstall @onceflow/connector-kafka's dependencies without --omit=optional (or --no-optional), on the platform the job runs on`,
        { ...details, reason: "unavailable" },
        { cause: error },
      );
    }
    throw new KafkaCompressionError(
      `${where} is ${codec.name}-compressed, but its bytes do not decompress (${error instanceof Error ? error.message : String(error)}); its checksum holds, so the producer wrote it so: the same bytes fail on every read. Skip the batch by starting past it, or have it written again`,
      { ...details, reason: "corrupt" },
      { cause: error },
    );
  }
}

/**
 * `batch` (a finished uncompressed record batch) with its records compressed by `codec`: a new
 * buffer, the header copied, length, attributes and CRC-32C written again.
 *
 * @example
 * ```ts
 * const bytes = compressRecordBatch(builder.finish(producer), codecOfType("zstd")!);
 * ```
 */
export function compressRecordBatch(batch: Buffer, codec: CompressionCodec): Buffer {
  const records = codec.compress(batch.subarray(RECORD_BATCH_HEADER_BYTES));
  const out = Buffer.allocUnsafe(RECORD_BATCH_HEADER_BYTES + records.length);
  out.set(batch.subarray(0, RECORD_BATCH_HEADER_BYTES), 0);
  out.set(records, RECORD_BATCH_HEADER_BYTES);
  out.writeInt32BE(out.length - LOG_OVERHEAD, LENGTH_OFFSET);
  const attributes = batch.readInt16BE(ATTRIBUTES_OFFSET);
  out.writeInt16BE((attributes & ~COMPRESSION_MASK) | codec.id, ATTRIBUTES_OFFSET);
  out.writeUInt32BE(crc32c(out, ATTRIBUTES_OFFSET, out.length), CRC_OFFSET);
  return out;
}
