/**
 * Produce request and response, version 3 (KIP-98: the first with a transactional id), encoded and
 * decoded here instead of by kafkajs. Version 3 is what every broker since 0.11 accepts, Kafka 4.x
 * included (4.0 removed versions 0–2 only, KIP-896); versions 4–8 add nothing a transactional
 * producer of uncompressed batches needs (v7 zstd, v8 per-record errors).
 *
 * On the wire: size INT32 · request header v1 (api_key INT16 · api_version INT16 · correlation_id
 *   INT32 · client_id NULLABLE_STRING) · the request.
 * Request v3: transactional_id NULLABLE_STRING · acks INT16 · timeout_ms INT32 ·
 *   [topic STRING · [partition INT32 · records (INT32 size + record batches)]]
 * Response v3: [topic STRING · [partition INT32 · error_code INT16 · base_offset INT64 ·
 *   log_append_time INT64]] · throttle_time_ms INT32
 */

/** Kafka's api key of Produce. */
export const PRODUCE_API_KEY = 0;
/** The Produce version this module speaks. */
export const PRODUCE_API_VERSION = 3;

/** One partition's record batch in a Produce request. */
export interface ProducePartition {
  readonly topic: string;
  readonly partition: number;
  readonly batch: Buffer;
}

/** A partition's answer to a Produce request. */
export interface ProducePartitionResponse {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: number;
  readonly baseOffset: bigint;
}

/** Where the correlation id sits in a request: after the size (INT32), api key and api version (INT16s). */
const CORRELATION_ID_OFFSET = 8;

/**
 * A whole Produce v3 request as it goes on the wire — size (INT32), request header v1 (api key,
 * api version, correlation id, client id) and body — in one buffer of its exact size: a view of
 * `allocate(size)`'s buffer when given (a pool's), else a new one. The correlation id is left 0 for
 * the connection to set (`setCorrelationId`). Writing the header here lets the request go to the
 * socket as it is, instead of kafkajs copying the body into a request of its own twice (into two
 * zero-filled buffers of the next power of two: about four bytes allocated per byte produced).
 * Partitions of the same topic must be adjacent in `partitions`.
 *
 * @example
 * ```ts
 * const request = encodeProduceRequest({ clientId: "onceflow", transactionalId: "orders-0-1-0", acks: -1,
 *   timeoutMs: 30_000, partitions: [{ topic: "orders", partition: 0, batch }] });
 * setCorrelationId(request, connection.nextCorrelationId());
 * ```
 */
export function encodeProduceRequest(request: {
  readonly clientId: string | null;
  readonly transactionalId: string | null;
  readonly acks: number;
  readonly timeoutMs: number;
  readonly partitions: readonly ProducePartition[];
  readonly allocate?: (size: number) => Buffer;
}): Buffer {
  const topics: Array<{ topic: string; partitions: ProducePartition[] }> = [];
  for (const p of request.partitions) {
    const last = topics[topics.length - 1];
    if (last !== undefined && last.topic === p.topic) last.partitions.push(p);
    else topics.push({ topic: p.topic, partitions: [p] });
  }
  let size = 4 + 2 + 2 + 4 + stringBytes(request.clientId);
  size += stringBytes(request.transactionalId) + 2 + 4 + 4;
  for (const t of topics) {
    size += 2 + Buffer.byteLength(t.topic) + 4;
    for (const p of t.partitions) size += 4 + 4 + p.batch.length;
  }
  const buffer =
    request.allocate === undefined ? Buffer.allocUnsafe(size) : request.allocate(size).subarray(0, size);
  let o = buffer.writeInt32BE(size - 4, 0);
  o = buffer.writeInt16BE(PRODUCE_API_KEY, o);
  o = buffer.writeInt16BE(PRODUCE_API_VERSION, o);
  o = buffer.writeInt32BE(0, o);
  o = writeString(buffer, o, request.clientId);
  o = writeString(buffer, o, request.transactionalId);
  o = buffer.writeInt16BE(request.acks, o);
  o = buffer.writeInt32BE(request.timeoutMs, o);
  o = buffer.writeInt32BE(topics.length, o);
  for (const t of topics) {
    o = writeString(buffer, o, t.topic);
    o = buffer.writeInt32BE(t.partitions.length, o);
    for (const p of t.partitions) {
      o = buffer.writeInt32BE(p.partition, o);
      o = buffer.writeInt32BE(p.batch.length, o);
      buffer.set(p.batch, o);
      o += p.batch.length;
    }
  }
  return buffer;
}

/**
 * Sets the correlation id of a request `encodeProduceRequest` wrote: the connection's next one,
 * taken just before the request is queued, as kafkajs takes it.
 *
 * @example
 * ```ts
 * setCorrelationId(request, connection.nextCorrelationId());
 * ```
 */
export function setCorrelationId(request: Buffer, correlationId: number): void {
  request.writeInt32BE(correlationId, CORRELATION_ID_OFFSET);
}

/**
 * The per-partition results of a Produce v3 response body (after the correlation id).
 *
 * @example
 * ```ts
 * for (const { topic, partition, errorCode } of decodeProduceResponse(payload)) if (errorCode !== 0) retry(topic, partition);
 * ```
 */
export function decodeProduceResponse(payload: Buffer): ProducePartitionResponse[] {
  const result: ProducePartitionResponse[] = [];
  let o = 0;
  const topics = payload.readInt32BE(o);
  o += 4;
  for (let t = 0; t < topics; t++) {
    const topicBytes = payload.readInt16BE(o);
    o += 2;
    const topic = payload.toString("utf8", o, o + topicBytes);
    o += topicBytes;
    const partitions = payload.readInt32BE(o);
    o += 4;
    for (let i = 0; i < partitions; i++) {
      const partition = payload.readInt32BE(o);
      const errorCode = payload.readInt16BE(o + 4);
      const baseOffset = payload.readBigInt64BE(o + 6);
      o += 4 + 2 + 8 + 8; // log_append_time is not needed
      result.push({ topic, partition, errorCode, baseOffset });
    }
  }
  return result;
}

/** The bytes of a (nullable) STRING: its INT16 length and its UTF-8. */
function stringBytes(value: string | null): number {
  return 2 + (value === null ? 0 : Buffer.byteLength(value));
}

function writeString(buffer: Buffer, offset: number, value: string | null): number {
  if (value === null) return buffer.writeInt16BE(-1, offset);
  const o = buffer.writeInt16BE(Buffer.byteLength(value), offset);
  return o + buffer.write(value, o, "utf8");
}
