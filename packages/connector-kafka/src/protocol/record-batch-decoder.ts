/**
 * Kafka's record batches (magic 2) decoded straight from a Fetch response buffer into
 * {@link RecordColumns} (a {@link RawRecord} is made when a record is handed out): keys and values are positions in the response (no copy, no view: the built-in
 * deserializers read them in place), header values are views into it, varints
 * are read inline, offsets are computed from the batch's base offset with number arithmetic where
 * exact, and control and aborted records are dropped while decoding, so no intermediate record
 * object is made. kafkajs's `recordBatch/v0/decoder` made one large object per record (batch
 * context, string offsets and timestamps, header objects rebuilt per header) that was then
 * converted again. The layout is in `record-batch-layout.ts`.
 *
 * Compressed batches are decompressed by the connector's own codecs (`compression/`: gzip, snappy,
 * lz4, zstd), synchronously: a batch is mostly a few KiB to a few hundred, and a call into the
 * thread pool per batch costs more than decompressing it. Old message sets (magic 0 and 1) still go
 * through kafkajs's decoder (and its `CompressionCodecs` registry).
 */
import { OnceflowError } from "@onceflow/core";
import { decodeLegacyMessageSet } from "../internal/kafkajs/legacy-message-set.js";
import { decompressRecords } from "./compression/record-batch-compression.js";
import { crc32c } from "./crc32c.js";
import {
  HEADER_LIST,
  type RawHeaders,
  type RawOffset,
  type RawRecord,
  type RawRecordViews,
} from "./raw-record.js";
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  COMPRESSION_MASK,
  CONTROL_FLAG,
  COUNT_OFFSET,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LENGTH_OFFSET,
  LOG_APPEND_TIME_FLAG,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  MAX_TIMESTAMP_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_HEADER_BYTES,
  RECORD_BATCH_MAGIC,
  TRANSACTIONAL_FLAG,
} from "./record-batch-layout.js";
import { NO_HEADERS, RecordColumns } from "./record-columns.js";

/** An aborted transaction as a Fetch response lists it: the producer and its first offset. */
export interface AbortedTransaction {
  readonly producerId: bigint;
  readonly firstOffset: bigint;
}

/** What decoding a partition's record set needs besides the bytes. */
export interface RecordSetContext {
  /** For error messages. */
  readonly topic: string;
  readonly partition: number;
  /** Records below it are dropped (a batch may start before the offset asked for). */
  readonly fetchOffset: bigint;
  /** The response's aborted transactions of this partition (empty or absent: none). */
  readonly abortedTransactions: readonly AbortedTransaction[] | undefined;
}

/** The visible records of a partition's record set, and where its last whole batch ends. */
export interface DecodedRecordSet {
  /** Columns from the thread's pool: {@link RecordColumns.release} them once handed out. */
  records: RecordColumns;
  /** The offset after the last whole batch, empty and control-only ones included; none: undefined. */
  batchesEnd: bigint | undefined;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const TWO_POW_32 = 4294967296;

export {
  HEADER_LIST,
  type RawHeaders,
  type RawOffset,
  type RawRecord,
  type RawRecordViews,
} from "./raw-record.js";
export { NO_HEADERS, RecordColumns } from "./record-columns.js";

const EMPTY = Buffer.alloc(0);

/**
 * A {@link RawRecord} of a key and a value given as Buffers (kafkajs's decoders, tests). Both views
 * of one memory (as kafkajs's decoders make them) are located in it; else they are copied into one
 * Buffer.
 *
 * @example
 * ```ts
 * const raw = rawRecordOf({ offset: 0, timestamp: 0, key: null, value: Buffer.from("v"), headers: NO_HEADERS });
 * viewsOf(raw).value?.toString(); // "v"
 * ```
 */
export function rawRecordOf(views: RawRecordViews): RawRecord {
  const { key, value } = views;
  let data: Buffer;
  let keyStart = 0;
  let valueStart = 0;
  if (key === null || value === null) {
    data = key ?? value ?? EMPTY;
  } else if (key.buffer === value.buffer) {
    data = Buffer.from(key.buffer);
    keyStart = key.byteOffset;
    valueStart = value.byteOffset;
  } else {
    data = Buffer.concat([key, value]);
    valueStart = key.length;
  }
  // The fields in the order decodeRecords writes them.
  return {
    offset: views.offset,
    timestamp: views.timestamp,
    data,
    keyStart,
    keyLength: key === null ? -1 : key.length,
    valueStart,
    valueLength: value === null ? -1 : value.length,
    headers: views.headers,
  };
}

/**
 * The record with its key and value as views into its `data` (`null` when absent), made now, for
 * what needs Buffers: the dead-letter topic, tests. (Not on the hot path.)
 *
 * @example
 * ```ts
 * const { key, value } = viewsOf(raw);
 * ```
 */
export function viewsOf(record: RawRecord): RawRecordViews {
  const { data, keyStart, keyLength, valueStart, valueLength } = record;
  return {
    offset: record.offset,
    timestamp: record.timestamp,
    key: keyLength < 0 ? null : data.subarray(keyStart, keyStart + keyLength),
    value: valueLength < 0 ? null : data.subarray(valueStart, valueStart + valueLength),
    headers: record.headers,
  };
}

/**
 * `offset` as a {@link RawOffset}: a number when exact, else the bigint itself.
 *
 * @example
 * ```ts
 * rawOffset(42n); // 42
 * rawOffset(2n ** 60n); // 1152921504606846976n
 * ```
 */
export function rawOffset(offset: bigint): RawOffset {
  return offset >= 0n && offset <= MAX_SAFE ? Number(offset) : offset;
}

/**
 * The offset after `offset`, as a bigint (a partition's position).
 *
 * @example
 * ```ts
 * offsetAfter(41); // 42n
 * ```
 */
export function offsetAfter(offset: RawOffset): bigint {
  return typeof offset === "number" ? BigInt(offset + 1) : offset + 1n;
}

/**
 * Decodes one partition's record set (the `records` bytes of a Fetch response partition): checks
 * each batch's CRC-32C (as the Java consumer's default `check.crcs`), drops records below the
 * fetch offset, control records, and records of aborted transactions (per producer, the aborted
 * transactions sorted by first offset, an abort marker ending its producer's). A partial batch at
 * the end (cut by the fetch's byte limits) is ignored: the next fetch reads it whole.
 *
 * @throws OnceflowError `SERVICE_UNAVAILABLE`, not retriable, when a batch is corrupt (CRC mismatch, bad length).
 * @throws KafkaCompressionError (permanent) when a compressed batch's codec is missing or fails.
 * @example
 * ```ts
 * const { records, batchesEnd } = await decodeRecordSet(bytes, {
 *   topic: "orders", partition: 0, fetchOffset: 0n, abortedTransactions: [],
 * });
 * ```
 */
export async function decodeRecordSet(set: Buffer, context: RecordSetContext): Promise<DecodedRecordSet> {
  const records = RecordColumns.acquire();
  const aborted =
    context.abortedTransactions !== undefined && context.abortedTransactions.length > 0
      ? new AbortedFilter(context.abortedTransactions)
      : undefined;
  const fetchOffset = context.fetchOffset;
  let batchesEnd: bigint | undefined;
  let pos = 0;
  const end = set.length;
  // Past the magic byte: enough to tell a batch from an old message set entry. A batch whose length
  // runs past the end is cut by the fetch's byte limits: the next fetch reads it whole.
  while (end - pos > MAGIC_OFFSET) {
    const length = set.readInt32BE(pos + LENGTH_OFFSET);
    const batchEnd = pos + LOG_OVERHEAD + length;
    if (length < 0 || batchEnd > end) break;
    const baseOffset = set.readBigInt64BE(pos + BASE_OFFSET_OFFSET);
    const magic = set[pos + MAGIC_OFFSET] as number;
    if (magic !== RECORD_BATCH_MAGIC) {
      if (magic > RECORD_BATCH_MAGIC) throw corrupt(context, baseOffset, `unknown magic ${magic}`);
      await decodeLegacyEntry(set.subarray(pos, batchEnd), fetchOffset, records);
      const entryEnd = baseOffset + 1n;
      if (batchesEnd === undefined || entryEnd > batchesEnd) batchesEnd = entryEnd;
      pos = batchEnd;
      continue;
    }
    if (length < RECORD_BATCH_HEADER_BYTES - LOG_OVERHEAD)
      throw corrupt(context, baseOffset, `batch length ${length}`);
    const storedCrc = set.readUInt32BE(pos + CRC_OFFSET);
    const crc = crc32c(set, pos + ATTRIBUTES_OFFSET, batchEnd);
    if (crc !== storedCrc) {
      throw corrupt(context, baseOffset, `CRC-32C ${crc} where the batch says ${storedCrc}`);
    }
    const attributes = set.readInt16BE(pos + ATTRIBUTES_OFFSET);
    const lastOffset = baseOffset + BigInt(set.readInt32BE(pos + LAST_OFFSET_DELTA_OFFSET));
    const count = set.readInt32BE(pos + COUNT_OFFSET);
    const batchStart = pos;
    pos = batchEnd;
    batchesEnd = lastOffset + 1n;
    if (count <= 0 || lastOffset < fetchOffset) continue;
    const control = (attributes & CONTROL_FLAG) !== 0;
    if (control && aborted === undefined) continue;
    const producerId = set.readBigInt64BE(batchStart + PRODUCER_ID_OFFSET);
    const transactional = (attributes & TRANSACTIONAL_FLAG) !== 0;
    // A batch of an aborted transaction that no later-listed transaction enters: skip it whole.
    const whole = aborted === undefined || !transactional || !aborted.startsBy(lastOffset);
    if (!control && whole && transactional && aborted?.has(producerId) === true) continue;

    let data = set;
    let start = batchStart + RECORD_BATCH_HEADER_BYTES;
    let stop = batchEnd;
    if ((attributes & COMPRESSION_MASK) !== 0) {
      data = decompressRecords(set.subarray(start, stop), attributes, {
        topic: context.topic,
        partition: context.partition,
        baseOffset,
      });
      start = 0;
      stop = data.length;
    }
    const firstTimestamp = readInt64AsNumber(set, batchStart + BASE_TIMESTAMP_OFFSET);
    const logAppendTime =
      (attributes & LOG_APPEND_TIME_FLAG) !== 0
        ? readInt64AsNumber(set, batchStart + MAX_TIMESTAMP_OFFSET)
        : undefined;
    const batch: BatchContext = {
      baseOffset,
      baseNumber: baseOffset >= 0n && lastOffset <= MAX_SAFE ? Number(baseOffset) : -1,
      minOffsetDelta: baseOffset >= fetchOffset ? -Infinity : Number(fetchOffset - baseOffset),
      firstTimestamp,
      logAppendTime,
    };
    if (!control && whole) {
      decodeRecords(data, start, stop, count, batch, records, context);
      continue;
    }
    // Control records, or a transactional batch that an aborted transaction enters part way.
    const decoded = RecordColumns.acquire();
    decodeRecords(data, start, stop, count, batch, decoded, context);
    const filter = aborted as AbortedFilter;
    for (let index = 0; index < decoded.length; index++) {
      const record = decoded.recordAt(index);
      filter.advance(record.offset);
      if (control) {
        if (isAbortMarker(record)) filter.end(producerId);
      } else if (!filter.has(producerId)) {
        records.pushRecord(record);
      }
    }
    decoded.release();
  }
  return { records, batchesEnd };
}

/** A record of a batch this client encoded, as {@link recordsOfBatch} gives it back. */
export interface EncodedRecord {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Absent when the record has none. */
  readonly headers: RawRecord["headers"] | undefined;
  /** Milliseconds since the epoch, as written. */
  readonly timestamp: number;
}

/**
 * The records of one record batch (magic 2, as `RecordBatchBuilder` writes them, compressed or not), for
 * a producer that must encode them again (a batch the topic refused as too large, split in two) or
 * name them in an error: the producer keeps the batch's bytes only, not the records it was made of.
 * Keys, values and header values are views into `batch`.
 *
 * @example
 * ```ts
 * const [first] = recordsOfBatch(builder.finish(producer));
 * first?.value?.toString();
 * ```
 */
export function recordsOfBatch(batch: Buffer): EncodedRecord[] {
  const context: RecordSetContext = {
    topic: "(a batch being produced)",
    partition: -1,
    fetchOffset: 0n,
    abortedTransactions: undefined,
  };
  const attributes = batch.readInt16BE(ATTRIBUTES_OFFSET);
  if (batch[MAGIC_OFFSET] !== RECORD_BATCH_MAGIC) throw corrupt(context, 0n, "not a record batch of magic 2");
  const data =
    (attributes & COMPRESSION_MASK) === 0
      ? batch
      : decompressRecords(batch.subarray(RECORD_BATCH_HEADER_BYTES), attributes, {
          topic: context.topic,
          partition: context.partition,
          baseOffset: 0n,
        });
  const columns = RecordColumns.acquire();
  decodeRecords(
    data,
    data === batch ? RECORD_BATCH_HEADER_BYTES : 0,
    data.length,
    batch.readInt32BE(COUNT_OFFSET),
    {
      baseOffset: 0n,
      baseNumber: 0,
      minOffsetDelta: -Infinity,
      firstTimestamp: readInt64AsNumber(batch, BASE_TIMESTAMP_OFFSET),
      logAppendTime: undefined,
    },
    columns,
    context,
  );
  const records = columns.toArray().map((raw): EncodedRecord => {
    const { key, value, headers, timestamp } = viewsOf(raw);
    return { key, value, headers: headers === NO_HEADERS ? undefined : headers, timestamp };
  });
  columns.release();
  return records;
}

interface BatchContext {
  readonly baseOffset: bigint;
  /** The base offset as a number when every offset of the batch is exact as one; else -1. */
  readonly baseNumber: number;
  /** Records with a smaller offset delta are below the fetch offset. */
  readonly minOffsetDelta: number;
  readonly firstTimestamp: number;
  /** The batch's max timestamp when the topic stamps log-append time (every record gets it). */
  readonly logAppendTime: number | undefined;
}

/** Read position of {@link decodeRecords} and its varint readers (synchronous: never interleaved). */
let at = 0;

/** Decodes `count` records from `data[start, stop)`, keeping those at or past the fetch offset. */
function decodeRecords(
  data: Buffer,
  start: number,
  stop: number,
  count: number,
  batch: BatchContext,
  out: RecordColumns,
  context: RecordSetContext,
): void {
  at = start;
  for (let i = 0; i < count; i++) {
    if (at >= stop) throw corrupt(context, batch.baseOffset, `${count} records announced, ${i} found`);
    const size = readVarint(data);
    const recordEnd = at + size;
    at++; // record attributes: unused
    const timestampDelta = readVarlong(data);
    const offsetDelta = readVarint(data);
    // Where the key and value lie, not views of them (see RawRecord).
    const keyLength = readVarint(data);
    const keyStart = at;
    if (keyLength > 0) at += keyLength;
    const valueLength = readVarint(data);
    const valueStart = at;
    if (valueLength > 0) at += valueLength;
    const headerCount = readVarint(data);
    const headers = headerCount <= 0 ? NO_HEADERS : readHeaders(data, headerCount);
    if (at > recordEnd || recordEnd > stop) {
      throw corrupt(context, batch.baseOffset, `record ${i} overruns its length`);
    }
    at = recordEnd;
    if (offsetDelta < batch.minOffsetDelta) continue;
    // A number where exact (a corrupt delta past the last one may not be): no bigint per record.
    const offset = batch.baseNumber + offsetDelta;
    out.push(
      batch.baseNumber >= 0 && offset >= 0 && offset <= Number.MAX_SAFE_INTEGER
        ? offset
        : rawOffset(batch.baseOffset + BigInt(offsetDelta)),
      batch.logAppendTime ?? batch.firstTimestamp + timestampDelta,
      data,
      keyStart,
      keyLength < 0 ? -1 : keyLength,
      valueStart,
      valueLength < 0 ? -1 : valueLength,
      headers,
    );
  }
}

/**
 * A record's headers as own properties, a repeated name collecting its values into an array in
 * order, and every header in the record's order under {@link HEADER_LIST}. A header named like an
 * `Object.prototype` member (`valueOf`, `__proto__` …) is an own property like any other.
 */
function readHeaders(data: Buffer, count: number): RawHeaders {
  const headers: Record<string, Buffer | null | Array<Buffer | null>> = {};
  const list: Array<readonly [string, Buffer | null]> = [];
  for (let h = 0; h < count; h++) {
    const nameLength = readVarint(data);
    // kafkajs named a null header name "null"; Kafka's clients never send one.
    const name = nameLength < 0 ? "null" : headerName(data, at, nameLength);
    if (nameLength > 0) at += nameLength;
    const valueLength = readVarint(data);
    let value: Buffer | null = null;
    if (valueLength >= 0) {
      value = data.subarray(at, at + valueLength);
      at += valueLength;
    }
    list.push([name, value]);
    if (!Object.hasOwn(headers, name)) {
      if (name === "__proto__") Object.defineProperty(headers, name, ownValue(value));
      else headers[name] = value;
      continue;
    }
    const seen = headers[name] as Buffer | null | Array<Buffer | null>;
    if (Array.isArray(seen)) seen.push(value);
    else if (name === "__proto__") Object.defineProperty(headers, name, ownValue([seen, value]));
    else headers[name] = [seen, value];
  }
  Object.defineProperty(headers, HEADER_LIST, { value: list });
  return headers;
}

/** Header names decoded lately, by their bytes: records of a topic mostly repeat a few names. */
const NAME_CACHE_SIZE = 32;
const MAX_CACHED_NAME_BYTES = 64;
const cachedNameBytes: Uint8Array[] = [];
const cachedNames: string[] = [];
let nextCacheSlot = 0;

/** The UTF-8 header name in `data[start, start + length)`, from the cache when seen lately. */
function headerName(data: Buffer, start: number, length: number): string {
  if (length > MAX_CACHED_NAME_BYTES) return data.toString("utf8", start, start + length);
  search: for (let c = 0; c < cachedNameBytes.length; c++) {
    const bytes = cachedNameBytes[c] as Uint8Array;
    if (bytes.length !== length) continue;
    for (let i = 0; i < length; i++) if (bytes[i] !== data[start + i]) continue search;
    return cachedNames[c] as string;
  }
  const name = data.toString("utf8", start, start + length);
  cachedNameBytes[nextCacheSlot] = new Uint8Array(data.subarray(start, start + length)); // a copy
  cachedNames[nextCacheSlot] = name;
  nextCacheSlot = (nextCacheSlot + 1) % NAME_CACHE_SIZE;
  return name;
}

function ownValue(value: unknown): PropertyDescriptor {
  return { value, writable: true, enumerable: true, configurable: true };
}

/** A zigzag varint (32-bit) at {@link at}. */
function readVarint(data: Buffer): number {
  let byte = data[at++] as number;
  let raw = byte & 0x7f;
  if (byte >= 0x80) {
    byte = data[at++] as number;
    raw |= (byte & 0x7f) << 7;
    if (byte >= 0x80) {
      byte = data[at++] as number;
      raw |= (byte & 0x7f) << 14;
      if (byte >= 0x80) {
        byte = data[at++] as number;
        raw |= (byte & 0x7f) << 21;
        if (byte >= 0x80) {
          byte = data[at++] as number;
          raw |= byte << 28;
        }
      }
    }
  }
  return (raw >>> 1) ^ -(raw & 1);
}

/** A zigzag varlong at {@link at}, as a number (exact up to 2^53: timestamp deltas). */
function readVarlong(data: Buffer): number {
  let byte = data[at++] as number;
  if (byte < 0x80) return (byte >>> 1) ^ -(byte & 1);
  let raw = byte & 0x7f;
  let scale = 128;
  do {
    byte = data[at++] as number;
    raw += (byte & 0x7f) * scale;
    scale *= 128;
  } while (byte >= 0x80 && scale <= 2 ** 63);
  return raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2;
}

/** A signed 64-bit integer as a number (exact up to 2^53: timestamps). */
function readInt64AsNumber(data: Buffer, offset: number): number {
  return data.readInt32BE(offset) * TWO_POW_32 + data.readUInt32BE(offset + 4);
}

function isAbortMarker(record: RawRecord): boolean {
  // Control record key: version int16, type int16 (0 abort, 1 commit); read in place.
  const { data, keyStart: k } = record;
  return (
    record.keyLength === 4 && data[k] === 0 && data[k + 1] === 0 && data[k + 2] === 0 && data[k + 3] === 0
  );
}

/**
 * The aborted transactions of a partition, entered in first-offset order as records pass them and
 * ended by their producer's abort marker, as the Java consumer does. (kafkajs's own filter expected
 * the broker's list sorted, which it is not, and entered only one transaction per record.)
 */
class AbortedFilter {
  private readonly upcoming: AbortedTransaction[];
  private next = 0;
  private readonly producers = new Set<bigint>();

  constructor(transactions: readonly AbortedTransaction[]) {
    this.upcoming = [...transactions].sort((a, b) =>
      a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0,
    );
  }

  /** Whether a transaction not yet entered starts at or before `offset`. */
  startsBy(offset: RawOffset): boolean {
    return (
      this.next < this.upcoming.length &&
      (this.upcoming[this.next] as AbortedTransaction).firstOffset <= offset
    );
  }

  /** Enters every transaction that starts at or before `offset`. */
  advance(offset: RawOffset): void {
    while (this.startsBy(offset)) {
      this.producers.add((this.upcoming[this.next] as AbortedTransaction).producerId);
      this.next++;
    }
  }

  has(producerId: bigint): boolean {
    return this.producers.has(producerId);
  }

  end(producerId: bigint): void {
    this.producers.delete(producerId);
  }
}

/** An old message set entry (magic 0 or 1) through kafkajs's decoder; no headers, no transactions. */
async function decodeLegacyEntry(entry: Buffer, fetchOffset: bigint, out: RecordColumns): Promise<void> {
  const messages = await decodeLegacyMessageSet(entry);
  for (const message of messages) {
    const offset = BigInt(message.offset);
    if (offset < fetchOffset) continue;
    out.pushRecord(
      rawRecordOf({
        offset: rawOffset(offset),
        timestamp: Number(message.timestamp ?? -1),
        key: message.key,
        value: message.value,
        headers: NO_HEADERS,
      }),
    );
  }
}

// Not `retriable`: fetching the same bytes again in a loop cannot repair them. As with the Java
// consumer's check.crcs, the reader fails and the job's restart strategy decides (a restart may read
// from a healthy replica after a leader change), as a Flink job would.
function corrupt(context: RecordSetContext, baseOffset: bigint, problem: string): OnceflowError {
  const error = new OnceflowError(
    "SERVICE_UNAVAILABLE",
    `corrupt record batch at offset ${baseOffset} of ${context.topic}[${context.partition}]: ${problem} ` +
      "(the broker's log or the network damaged it; check the broker's log for this partition)",
    { details: { topic: context.topic, partition: context.partition, offset: String(baseOffset) } },
  );
  return Object.assign(error, { retriable: false as const });
}
