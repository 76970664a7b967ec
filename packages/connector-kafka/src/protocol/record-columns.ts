/**
 * The records of one partition's Fetch as columns — offsets, timestamps and where each key and value
 * lie — in typed arrays, a {@link RawRecord} made only when a record is handed out.
 *
 * Why: fetched records wait in the prefetch buffer (megabytes of them) while the job works. As one
 * object each they outlived young-generation collections, were copied by each and promoted, and
 * filled the old generation with records already handed out. Columns are a few objects per Fetch
 * whatever its size, and the record object made at hand-out dies young. The columns' arrays are
 * recycled when their records are all handed out ({@link RecordColumns.release}): they are
 * internal, no record points into them.
 */
import type { RawOffset, RawRecord } from "./raw-record.js";

type Headers = RawRecord["headers"];

/** Shared by every record without headers; frozen, so no reader can change another's. */
export const NO_HEADERS: Readonly<Record<string, Buffer | null | Array<Buffer | null>>> = Object.freeze({});

/** Where a record lies: data index, key start, key length, value start, value length. */
const FIELDS = 5;
const INITIAL_CAPACITY = 256;
/** Free columns kept for the next Fetches of this thread: a reader's buffer holds a few at a time. */
const MAX_POOLED = 16;
/** Columns grown past this many records are not kept (a rare huge Fetch should not pin its arrays). */
const MAX_POOLED_CAPACITY = 1 << 17;

/**
 * Records in fetch order, appended by the decoders and read by index.
 *
 * @example
 * ```ts
 * const columns = RecordColumns.acquire();
 * columns.push(0, 1_700_000_000_000, data, -1, -1, 0, data.length, NO_HEADERS);
 * columns.recordAt(0).valueLength; // data.length
 * columns.release(); // every record handed out: the arrays serve the next Fetch
 * ```
 */
export class RecordColumns {
  private static readonly pool: RecordColumns[] = [];

  /** Columns from this thread's pool, empty, or new ones. */
  static acquire(): RecordColumns {
    const pooled = RecordColumns.pool.pop();
    if (pooled === undefined) return new RecordColumns(INITIAL_CAPACITY);
    pooled.released = false;
    return pooled;
  }

  /** Columns holding `records` (kafkajs's decoders, older message formats, tests). */
  static of(records: Iterable<RawRecord>): RecordColumns {
    const columns = RecordColumns.acquire();
    for (const record of records) columns.pushRecord(record);
    return columns;
  }

  /** How many records there are. */
  length = 0;
  /** The sum of the key and value lengths (a null one counts 0). */
  payloadBytes = 0;
  private offsets: Float64Array;
  private timestamps: Float64Array;
  private positions: Int32Array;
  /** The Buffers keys and values lie in: the response, or decompressed batches. */
  private readonly data: Buffer[] = [];
  /** Offsets that are bigints (past 2^53, never in practice), by index; their `offsets` entry is -1. */
  private bigOffsets: Map<number, bigint> | undefined;
  /** Per record, once one record has headers; before that every record has none. */
  private headers: Headers[] | undefined;
  private released = false;

  private constructor(capacity: number) {
    this.offsets = new Float64Array(capacity);
    this.timestamps = new Float64Array(capacity);
    this.positions = new Int32Array(capacity * FIELDS);
  }

  /** Appends a record; a key or value length of -1 is null. */
  push(
    offset: RawOffset,
    timestamp: number,
    data: Buffer,
    keyStart: number,
    keyLength: number,
    valueStart: number,
    valueLength: number,
    headers: Headers,
  ): void {
    const index = this.length;
    if (index === this.offsets.length) this.grow();
    if (typeof offset === "number") {
      this.offsets[index] = offset;
    } else {
      this.offsets[index] = -1;
      if (this.bigOffsets === undefined) this.bigOffsets = new Map();
      this.bigOffsets.set(index, offset);
    }
    this.timestamps[index] = timestamp;
    let dataIndex = this.data.length - 1;
    if (this.data[dataIndex] !== data) dataIndex = this.data.push(data) - 1;
    const at = index * FIELDS;
    const positions = this.positions;
    positions[at] = dataIndex;
    positions[at + 1] = keyStart;
    positions[at + 2] = keyLength;
    positions[at + 3] = valueStart;
    positions[at + 4] = valueLength;
    if (headers !== NO_HEADERS || this.headers !== undefined) {
      if (this.headers === undefined) this.headers = new Array<Headers>(index).fill(NO_HEADERS);
      this.headers.push(headers);
    }
    this.payloadBytes += Math.max(keyLength, 0) + Math.max(valueLength, 0);
    this.length = index + 1;
  }

  /** Appends a record object's fields. */
  pushRecord(record: RawRecord): void {
    this.push(
      record.offset,
      record.timestamp,
      record.data,
      record.keyStart,
      record.keyLength,
      record.valueStart,
      record.valueLength,
      record.headers,
    );
  }

  /** The offset of record `index` (a number when exact, as in {@link RawRecord}). */
  offsetAt(index: number): RawOffset {
    const offset = this.offsets[index] as number;
    return offset >= 0 ? offset : (this.bigOffsets?.get(index) as bigint);
  }

  /** Record `index` as an object (made now: it dies young once deserialized). */
  recordAt(index: number): RawRecord {
    const at = index * FIELDS;
    const positions = this.positions;
    // The fields in RawRecord's order (one hidden class on the hot path).
    return {
      offset: this.offsetAt(index),
      timestamp: this.timestamps[index] as number,
      data: this.data[positions[at] as number] as Buffer,
      keyStart: positions[at + 1] as number,
      keyLength: positions[at + 2] as number,
      valueStart: positions[at + 3] as number,
      valueLength: positions[at + 4] as number,
      headers: this.headers === undefined ? NO_HEADERS : (this.headers[index] as Headers),
    };
  }

  /** Every record as an object (tests, the older decoders' paths). */
  toArray(): RawRecord[] {
    return Array.from({ length: this.length }, (_, index) => this.recordAt(index));
  }

  /**
   * Gives the arrays back for a later Fetch of this thread. Only once every record was handed out
   * (or dropped): the columns are empty afterwards, and not to be used by their former holder.
   */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.length = 0;
    this.payloadBytes = 0;
    this.data.length = 0;
    this.bigOffsets = undefined;
    this.headers = undefined;
    if (this.offsets.length <= MAX_POOLED_CAPACITY && RecordColumns.pool.length < MAX_POOLED)
      RecordColumns.pool.push(this);
  }

  private grow(): void {
    const capacity = this.offsets.length * 2;
    const offsets = new Float64Array(capacity);
    offsets.set(this.offsets);
    this.offsets = offsets;
    const timestamps = new Float64Array(capacity);
    timestamps.set(this.timestamps);
    this.timestamps = timestamps;
    const positions = new Int32Array(capacity * FIELDS);
    positions.set(this.positions);
    this.positions = positions;
  }
}
