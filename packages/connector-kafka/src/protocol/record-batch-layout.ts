/**
 * The layout of Kafka's record batch (magic 2), shared by the encoder (`record-batch-encoder.ts`)
 * and the decoder (`record-batch-decoder.ts`).
 *
 * Header (all big-endian), offsets into the batch:
 *   0 baseOffset int64 · 8 batchLength int32 · 12 partitionLeaderEpoch int32 · 16 magic int8 ·
 *   17 crc uint32 (CRC-32C of everything from 21) · 21 attributes int16 · 23 lastOffsetDelta int32 ·
 *   27 baseTimestamp int64 · 35 maxTimestamp int64 · 43 producerId int64 · 51 producerEpoch int16 ·
 *   53 baseSequence int32 · 57 records count int32 · 61 records (compressed as one block when
 *   attributes & 0x07 is not 0).
 * Record: length varint · attributes int8 · timestampDelta varlong · offsetDelta varint ·
 *   key (varint length, -1 for null) · value (same) · header count varint · headers (key, value).
 */

/** Bytes before the first record. */
export const RECORD_BATCH_HEADER_BYTES = 61;
/** Offset and length of a batch (or old message set entry), before what the length counts. */
export const LOG_OVERHEAD = 12;

/** baseOffset int64: the offset of the first record. */
export const BASE_OFFSET_OFFSET = 0;
/** batchLength int32: the bytes after it ({@link LOG_OVERHEAD} less than the batch). */
export const LENGTH_OFFSET = 8;
/** partitionLeaderEpoch int32. */
export const LEADER_EPOCH_OFFSET = 12;
/** magic int8: {@link RECORD_BATCH_MAGIC}; 0 and 1 are old message sets. */
export const MAGIC_OFFSET = 16;
/** crc uint32: CRC-32C of the batch from {@link ATTRIBUTES_OFFSET} to its end. */
export const CRC_OFFSET = 17;
/** attributes int16: compression, timestamp type, transactional and control bits. */
export const ATTRIBUTES_OFFSET = 21;
/** lastOffsetDelta int32. */
export const LAST_OFFSET_DELTA_OFFSET = 23;
/** baseTimestamp int64. */
export const BASE_TIMESTAMP_OFFSET = 27;
/** maxTimestamp int64 (every record's timestamp under log-append time). */
export const MAX_TIMESTAMP_OFFSET = 35;
/** producerId int64. */
export const PRODUCER_ID_OFFSET = 43;
/** producerEpoch int16. */
export const PRODUCER_EPOCH_OFFSET = 51;
/** baseSequence int32. */
export const BASE_SEQUENCE_OFFSET = 53;
/** records count int32. */
export const COUNT_OFFSET = 57;

/** The magic byte of a record batch. */
export const RECORD_BATCH_MAGIC = 2;

/** Attributes: the compression codec bits (none when 0). */
export const COMPRESSION_MASK = 0x07;
/** Attributes: the topic stamps log-append time. */
export const LOG_APPEND_TIME_FLAG = 0x08;
/** Attributes: the records are part of a transaction. */
export const TRANSACTIONAL_FLAG = 0x10;
/** Attributes: a control batch (transaction markers). */
export const CONTROL_FLAG = 0x20;
