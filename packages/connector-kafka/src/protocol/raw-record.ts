/**
 * A fetched record before deserialization, as the record batch decoder and the fetched-record
 * columns both speak of it (its own module so neither imports the other for it).
 */
/**
 * A record's offset as a {@link RawRecord} holds it: a number when exact (from 0 to 2^53 - 1, every
 * offset in practice: no bigint to allocate per record), else a bigint. `String(offset)` is its
 * decimal form either way; compare it with a bigint directly, or see {@link offsetAfter}.
 */
export type RawOffset = number | bigint;

/**
 * A record as read from a partition, before deserialization. Its key and value are where they lie in
 * `data`, not Buffer views: records wait in the prefetch buffer, so two views per record outlived
 * young-generation GCs, and the built-in deserializers read the bytes in place anyway.
 * {@link viewsOf} makes the views where one is needed; {@link rawRecordOf} makes a record of views.
 * Every record has these fields in this order (one hidden class on the hot path).
 */
export interface RawRecord {
  offset: RawOffset;
  timestamp: number;
  /** The bytes the key and value lie in: the Fetch response, or a decompressed batch. */
  data: Buffer;
  keyStart: number;
  /** -1 for a null key (as Kafka writes it). */
  keyLength: number;
  valueStart: number;
  /** -1 for a null value. */
  valueLength: number;
  /**
   * `NO_HEADERS` (record-columns.ts) (shared, frozen) when the record has none. A repeated name's
   * values are an array; the order across names is kept under {@link HEADER_LIST}.
   */
  headers: RawHeaders;
}

/**
 * The key under which a record's raw headers (non-enumerable) keep every header in the record's
 * order, `[name, value]` — names repeated and interleaved as they come, which the name map alone
 * cannot say.
 */
export const HEADER_LIST: unique symbol = Symbol("onceflow.kafka.headerList");

/** A record's headers by name, with their order under {@link HEADER_LIST} when the decoder read them. */
export type RawHeaders = Record<string, Buffer | null | Array<Buffer | null> | undefined> & {
  readonly [HEADER_LIST]?: ReadonlyArray<readonly [string, Buffer | null]>;
};

/** A {@link RawRecord} with its key and value as Buffers (or `null`), as kafkajs's decoders give them. */
export interface RawRecordViews {
  offset: RawOffset;
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: RawRecord["headers"];
}
