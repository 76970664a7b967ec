/**
 * The two Kafka admin requests that find transactions, in their first (flexible) versions:
 * ListTransactions v0 (API key 66, KIP-664, Kafka 3.0+) and DescribeTransactions v0 (API key 65).
 * kafkajs 2.2.4 knows neither and encodes only the v1 request header, so the body written here
 * starts with the request header's empty tagged-field section (header v2 = v1 + tagged fields),
 * and the decoders skip the response header's one.
 */

/** ListTransactions v0: every broker lists the transactions it coordinates. */
export const LIST_TRANSACTIONS = { apiKey: 66, apiVersion: 0, apiName: "ListTransactions" } as const;
/** DescribeTransactions v0: the coordinator of an id describes its transaction. */
export const DESCRIBE_TRANSACTIONS = { apiKey: 65, apiVersion: 0, apiName: "DescribeTransactions" } as const;

/** One transaction as ListTransactions reports it. */
export interface ListedTransaction {
  readonly transactionalId: string;
  readonly producerId: string;
  /** Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Empty, Dead, PrepareEpochFence. */
  readonly state: string;
}

/** One transaction as DescribeTransactions reports it. */
export interface DescribedTransaction {
  readonly errorCode: number;
  readonly transactionalId: string;
  readonly state: string;
  readonly timeoutMs: number;
  /** When the ongoing transaction began (ms since the epoch); -1 when none is ongoing. */
  readonly startTimeMs: number;
  readonly producerId: string;
  readonly producerEpoch: number;
  readonly topics: ReadonlyArray<{ readonly topic: string; readonly partitions: readonly number[] }>;
}

// ---- encoding ---------------------------------------------------------------------------------

function unsignedVarInt(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value >>> 0;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function compactString(value: string): Buffer {
  const bytes = Buffer.from(value, "utf8");
  return Buffer.concat([unsignedVarInt(bytes.length + 1), bytes]);
}

function compactArray(items: readonly Buffer[]): Buffer {
  return Buffer.concat([unsignedVarInt(items.length + 1), ...items]);
}

const NO_TAGGED_FIELDS = Buffer.from([0]);

/**
 * ListTransactions v0, optionally filtered by state (empty: every state).
 *
 * @example
 * ```ts
 * encodeListTransactions(["Ongoing"]); // <Buffer 00 02 08 4f 6e 67 6f 69 6e 67 01 00>
 * ```
 */
export function encodeListTransactions(stateFilters: readonly string[]): Buffer {
  return Buffer.concat([
    NO_TAGGED_FIELDS, // the request header's
    compactArray(stateFilters.map(compactString)),
    compactArray([]), // producer id filters
    NO_TAGGED_FIELDS,
  ]);
}

/**
 * DescribeTransactions v0 for the given transactional ids (sent to their coordinator).
 *
 * @example
 * ```ts
 * encodeDescribeTransactions(["orders-0-1"]);
 * ```
 */
export function encodeDescribeTransactions(transactionalIds: readonly string[]): Buffer {
  return Buffer.concat([
    NO_TAGGED_FIELDS,
    compactArray(transactionalIds.map(compactString)),
    NO_TAGGED_FIELDS,
  ]);
}

// ---- decoding ---------------------------------------------------------------------------------

/** Reads a flexible-version response body. Throws on truncated input. */
class FlexibleReader {
  private offset = 0;
  constructor(private readonly buffer: Buffer) {}

  private need(bytes: number): void {
    if (this.offset + bytes > this.buffer.length) {
      throw new Error(
        `truncated Kafka response: need ${bytes} byte(s) at offset ${this.offset} of ${this.buffer.length}`,
      );
    }
  }
  int16(): number {
    this.need(2);
    const value = this.buffer.readInt16BE(this.offset);
    this.offset += 2;
    return value;
  }
  int32(): number {
    this.need(4);
    const value = this.buffer.readInt32BE(this.offset);
    this.offset += 4;
    return value;
  }
  int64(): bigint {
    this.need(8);
    const value = this.buffer.readBigInt64BE(this.offset);
    this.offset += 8;
    return value;
  }
  unsignedVarInt(): number {
    let value = 0;
    for (let shift = 0; shift <= 28; shift += 7) {
      this.need(1);
      const byte = this.buffer[this.offset++] as number;
      value |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value >>> 0;
    }
    throw new Error("malformed unsigned varint in Kafka response");
  }
  compactString(): string {
    const length = this.unsignedVarInt() - 1;
    if (length < 0) return "";
    this.need(length);
    const value = this.buffer.toString("utf8", this.offset, this.offset + length);
    this.offset += length;
    return value;
  }
  compactArray<T>(read: () => T): T[] {
    const length = this.unsignedVarInt() - 1;
    const items: T[] = [];
    for (let index = 0; index < length; index++) items.push(read());
    return items;
  }
  skipTaggedFields(): void {
    const count = this.unsignedVarInt();
    for (let index = 0; index < count; index++) {
      this.unsignedVarInt(); // tag
      const size = this.unsignedVarInt();
      this.need(size);
      this.offset += size;
    }
  }
}

/**
 * Decodes a ListTransactions v0 response body (after the correlation id).
 *
 * @example
 * ```ts
 * const { errorCode, transactions } = decodeListTransactions(payload);
 * ```
 */
export function decodeListTransactions(payload: Buffer): {
  errorCode: number;
  transactions: ListedTransaction[];
} {
  const reader = new FlexibleReader(payload);
  reader.skipTaggedFields(); // the response header's
  reader.int32(); // throttle time
  const errorCode = reader.int16();
  reader.compactArray(() => reader.compactString()); // unknown state filters
  const transactions = reader.compactArray(() => {
    const transactionalId = reader.compactString();
    const producerId = reader.int64().toString();
    const state = reader.compactString();
    reader.skipTaggedFields();
    return { transactionalId, producerId, state };
  });
  reader.skipTaggedFields();
  return { errorCode, transactions };
}

/**
 * Decodes a DescribeTransactions v0 response body (after the correlation id).
 *
 * @example
 * ```ts
 * const [described] = decodeDescribeTransactions(payload);
 * ```
 */
export function decodeDescribeTransactions(payload: Buffer): DescribedTransaction[] {
  const reader = new FlexibleReader(payload);
  reader.skipTaggedFields();
  reader.int32(); // throttle time
  const transactions = reader.compactArray(() => {
    const errorCode = reader.int16();
    const transactionalId = reader.compactString();
    const state = reader.compactString();
    const timeoutMs = reader.int32();
    const startTimeMs = Number(reader.int64());
    const producerId = reader.int64().toString();
    const producerEpoch = reader.int16();
    const topics = reader.compactArray(() => {
      const topic = reader.compactString();
      const partitions = reader.compactArray(() => reader.int32());
      reader.skipTaggedFields();
      return { topic, partitions };
    });
    reader.skipTaggedFields();
    return { errorCode, transactionalId, state, timeoutMs, startTimeMs, producerId, producerEpoch, topics };
  });
  reader.skipTaggedFields();
  return transactions;
}
