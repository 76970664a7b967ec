/**
 * Fetch responses turned into {@link FetchedPartition}s. Version 11 (Kafka 2.3 and later) is read
 * here straight from the response buffer, its record sets by the lean `record-batch-decoder`; an
 * older version negotiated by kafkajs keeps kafkajs's decoder, whose output is converted below.
 */
import {
  type AbortedTransaction,
  decodeRecordSet,
  NO_HEADERS,
  type RawRecord,
  RecordColumns,
  rawOffset,
  rawRecordOf,
} from "./record-batch-decoder.js";

/** What one partition returned in a Fetch. */
export interface FetchedPartition {
  topic: string;
  partition: number;
  /** Columns from the thread's pool: {@link RecordColumns.release} them once handed out. */
  records: RecordColumns;
  /** The offset to fetch next; past every batch seen, including control-only ones. */
  nextOffset: bigint;
  highWatermark: bigint;
  lastStableOffset: bigint | undefined;
}

/** A partition a Fetch answered with an error code instead of records (`OFFSET_OUT_OF_RANGE` …). */
export interface FailedPartition {
  topic: string;
  partition: number;
  /** Kafka's protocol error code, never 0. */
  errorCode: number;
}

/** What a Fetch returned: records per partition, and the partitions that failed on their own. */
export interface FetchedPartitions {
  fetched: FetchedPartition[];
  failed: FailedPartition[];
}

/** The offset asked for per partition, keyed by {@link partitionKey}. */
export type RequestedOffsets = ReadonlyMap<string, bigint>;

/** The key of a partition in {@link RequestedOffsets}. */
export function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

/** A partition of a decoded v11 response. */
interface LeanPartition {
  partition: number;
  errorCode: number;
  /** Undefined for a partition not asked for. */
  fetched: FetchedPartition | undefined;
}

/** A raw record as kafkajs decodes it from a record batch (older Fetch versions only). */
export interface DecodedMessage {
  offset: string;
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | null | Array<Buffer | null> | undefined>;
  isControlRecord: boolean;
  batchContext: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

/** A partition as kafkajs's own Fetch decoders return it (versions before 11). */
interface KafkajsPartition {
  partition: number;
  errorCode: number;
  highWatermark: string;
  lastStableOffset?: string;
  abortedTransactions?: Array<{ producerId: string; firstOffset: string }>;
  messages: DecodedMessage[];
}

/** What a Fetch request through kafkajs's connection resolves to, lean (v11) or kafkajs's. */
export interface FetchResponse {
  responses: Array<{ topicName: string; partitions: Array<LeanPartition | KafkajsPartition> }>;
}

/**
 * Decodes a Fetch v11 response (the `decode` of kafkajs's protocol request; partition errors are
 * kept per partition, for {@link fetchedPartitions}). Records below the offset asked for, control records and records of
 * aborted transactions are gone; a partition's next offset is past every whole batch.
 *
 * Fetch Response (Version: 11) => throttle_time_ms error_code session_id [responses]
 *   responses => topic [partition partition_error high_watermark last_stable_offset log_start_offset
 *     [aborted_transactions (producer_id first_offset)] preferred_read_replica records]
 *
 * @example
 * ```ts
 * protocolRequest.response = { decode: (raw) => decodeFetchV11(raw, requested), parse: v11.parse };
 * ```
 */
export async function decodeFetchV11(raw: Buffer, requested: RequestedOffsets): Promise<unknown> {
  let at = 0;
  const int16 = () => {
    const value = raw.readInt16BE(at);
    at += 2;
    return value;
  };
  const int32 = () => {
    const value = raw.readInt32BE(at);
    at += 4;
    return value;
  };
  const int64 = () => {
    const value = raw.readBigInt64BE(at);
    at += 8;
    return value;
  };
  const clientSideThrottleTime = int32();
  const errorCode = int16();
  const sessionId = int32();
  const responses: Array<{ topicName: string; partitions: LeanPartition[] }> = [];
  const topicCount = int32();
  for (let t = 0; t < topicCount; t++) {
    const nameLength = int16();
    const topicName = raw.toString("utf8", at, at + Math.max(nameLength, 0));
    at += Math.max(nameLength, 0);
    const partitions: LeanPartition[] = [];
    const partitionCount = int32();
    for (let p = 0; p < partitionCount; p++) {
      const partition = int32();
      const partitionError = int16();
      const highWatermark = int64();
      const lastStableOffset = int64();
      at += 8; // log_start_offset
      const abortedCount = int32();
      const abortedTransactions: AbortedTransaction[] = [];
      for (let a = 0; a < abortedCount; a++) {
        const producerId = int64();
        abortedTransactions.push({ producerId, firstOffset: int64() });
      }
      at += 4; // preferred_read_replica
      const size = int32();
      // As kafkajs: a record set not wholly in the response is no record set.
      const records = size > 0 && raw.length - at >= size ? raw.subarray(at, at + size) : undefined;
      if (records !== undefined) at += size;
      const fetchOffset = requested.get(partitionKey(topicName, partition));
      let fetched: FetchedPartition | undefined;
      if (fetchOffset !== undefined) {
        const decoded =
          records === undefined
            ? { records: RecordColumns.acquire(), batchesEnd: undefined }
            : await decodeRecordSet(records, {
                topic: topicName,
                partition,
                fetchOffset,
                abortedTransactions,
              });
        fetched = {
          topic: topicName,
          partition,
          records: decoded.records,
          // Past every whole batch, also an empty or control-only one, never back.
          nextOffset:
            decoded.batchesEnd !== undefined && decoded.batchesEnd > fetchOffset
              ? decoded.batchesEnd
              : fetchOffset,
          highWatermark,
          lastStableOffset,
        };
      }
      partitions.push({ partition, errorCode: partitionError, fetched });
    }
    responses.push({ topicName, partitions });
  }
  // As kafkajs: the broker did not throttle; a client-side throttle time is for the client to honour.
  return { throttleTime: 0, clientSideThrottleTime, errorCode, sessionId, responses };
}

/**
 * The partitions asked for, from a response decoded by {@link decodeFetchV11} or by kafkajs. A
 * partition's error is its own: the others' records are returned beside it, as the Java consumer
 * reads them.
 */
export function fetchedPartitions(response: FetchResponse, requested: RequestedOffsets): FetchedPartitions {
  const fetched: FetchedPartition[] = [];
  const failed: FailedPartition[] = [];
  for (const { topicName, partitions } of response.responses) {
    for (const data of partitions) {
      const fetchOffset = requested.get(partitionKey(topicName, data.partition));
      if (fetchOffset === undefined) continue;
      if (data.errorCode !== 0) {
        if ("fetched" in data) data.fetched?.records.release();
        failed.push({ topic: topicName, partition: data.partition, errorCode: data.errorCode });
      } else if ("fetched" in data) {
        if (data.fetched !== undefined) fetched.push(data.fetched);
      } else {
        fetched.push(fromKafkajs(topicName, data, fetchOffset));
      }
    }
  }
  return { fetched, failed };
}

/** A partition as kafkajs's decoders of Fetch versions before 11 return it. */
function fromKafkajs(topic: string, data: KafkajsPartition, fetchOffset: bigint): FetchedPartition {
  const { records, nextOffset } = recordsFromKafkajs(data.messages, fetchOffset, data.abortedTransactions);
  return {
    topic,
    partition: data.partition,
    records: RecordColumns.of(records),
    nextOffset,
    highWatermark: BigInt(data.highWatermark),
    lastStableOffset: data.lastStableOffset === undefined ? undefined : BigInt(data.lastStableOffset),
  };
}

/**
 * The records of a partition that kafkajs decoded, as {@link RawRecord}s: those at or past
 * `fetchOffset`, control records and aborted transactions removed ({@link withoutAborted}), headers
 * made own properties ({@link ownHeaders}), {@link NO_HEADERS} for none. `nextOffset` is past the
 * batch of every message, and never below `fetchOffset`.
 *
 * @example
 * ```ts
 * const { records, nextOffset } = recordsFromKafkajs(partition.messages, 42n, partition.abortedTransactions);
 * ```
 */
export function recordsFromKafkajs(
  messages: readonly DecodedMessage[],
  fetchOffset: bigint,
  abortedTransactions: ReadonlyArray<{ producerId: string; firstOffset: string }> | undefined,
): { records: RawRecord[]; nextOffset: bigint } {
  let nextOffset = fetchOffset;
  const within: DecodedMessage[] = [];
  for (const message of messages) {
    const batchEnd =
      BigInt(message.batchContext.firstOffset) + BigInt(message.batchContext.lastOffsetDelta) + 1n;
    if (batchEnd > nextOffset) nextOffset = batchEnd;
    if (BigInt(message.offset) >= fetchOffset) within.push(message);
  }
  const records = withoutAborted(within, abortedTransactions).map(
    (m): RawRecord =>
      rawRecordOf({
        offset: rawOffset(BigInt(m.offset)),
        timestamp: Number(m.timestamp),
        key: m.key,
        value: m.value,
        // kafkajs gives a record without headers `{}`: the shared NO_HEADERS, as the lean decoder.
        headers: Object.keys(m.headers).length === 0 ? NO_HEADERS : ownHeaders(m.headers),
      }),
  );
  return { records, nextOffset };
}

const ABORT_MARKER_KEY = Buffer.from([0, 0, 0, 0]);

/**
 * Drops control records and the records of aborted transactions, as the Java consumer does.
 * kafkajs' own filter is not used: it expects the broker's aborted-transaction list sorted by first
 * offset (brokers do not sort it) and enters only one aborted transaction per record, so it lets
 * aborted records through when transactions of several producers interleave. (The v11 path does the
 * same while decoding, in `record-batch-decoder.ts`.)
 */
export function withoutAborted(
  messages: readonly DecodedMessage[],
  abortedTransactions: ReadonlyArray<{ producerId: string; firstOffset: string }> | undefined,
): DecodedMessage[] {
  if (abortedTransactions === undefined || abortedTransactions.length === 0) {
    return messages.filter((m) => !m.isControlRecord);
  }
  const upcoming = abortedTransactions
    .map((t) => ({ producerId: t.producerId, firstOffset: BigInt(t.firstOffset) }))
    .sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0));
  const abortedProducers = new Set<string>();
  let next = 0;
  const visible: DecodedMessage[] = [];
  for (const message of messages) {
    const offset = BigInt(message.offset);
    while (next < upcoming.length && (upcoming[next] as { firstOffset: bigint }).firstOffset <= offset) {
      abortedProducers.add((upcoming[next] as { producerId: string }).producerId);
      next++;
    }
    const { producerId, inTransaction } = message.batchContext;
    if (message.isControlRecord) {
      // An abort marker ends that producer's aborted transaction.
      if (message.key !== null && Buffer.from(message.key).equals(ABORT_MARKER_KEY))
        abortedProducers.delete(producerId);
      continue;
    }
    if (inTransaction && abortedProducers.has(producerId)) continue;
    visible.push(message);
  }
  return visible;
}

/**
 * A record's headers without what kafkajs's decoder took from `Object.prototype`: it collects
 * headers into a plain object, so a header named `valueOf`, `toString`, `constructor` or
 * `__proto__` starts out as that member and decodes as `[member, value]`.
 */
export function ownHeaders(
  headers: Readonly<Record<string, unknown>>,
): Record<string, Buffer | null | Array<Buffer | null>> {
  const own: Record<string, Buffer | null | Array<Buffer | null>> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!Array.isArray(value)) {
      own[name] = value as Buffer | null;
      continue;
    }
    const kept = value.filter((item): item is Buffer | null => item === null || Buffer.isBuffer(item));
    // A name seen once, after the prototype's member: one value, not an array.
    own[name] = kept.length === 1 && kept.length < value.length ? (kept[0] as Buffer | null) : kept;
  }
  return own;
}
