import { createRequire } from "node:module";
import { gzipSync } from "node:zlib";
import { isOnceflowError } from "@onceflow/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { crc32c } from "./crc32c.js";
import { type DecodedMessage, recordsFromKafkajs } from "./fetch-response.js";
import {
  decodeRecordSet,
  HEADER_LIST,
  NO_HEADERS,
  offsetAfter,
  type RawHeaders,
  type RawRecord,
  rawOffset,
  rawRecordOf,
  recordsOfBatch,
  viewsOf,
} from "./record-batch-decoder.js";
import { encodeRecordBatch } from "./record-batch-encoder.js";

// The reference: kafkajs's record batch decoder plus the conversion onceflow did before the lean one.
const requireKafkajs = createRequire(import.meta.url);
const Decoder = requireKafkajs("kafkajs/src/protocol/decoder") as new (
  buffer: Buffer,
) => { canReadBytes(n: number): boolean };
const decodeBatch = requireKafkajs("kafkajs/src/protocol/recordBatch/v0/decoder") as (
  decoder: unknown,
) => Promise<{ firstOffset: string; lastOffsetDelta: number; records: DecodedMessage[] }>;

interface TestRecord {
  offsetDelta: number;
  timestampDelta: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: Array<[string, Buffer | null]>;
}

interface TestBatch {
  baseOffset: bigint;
  lastOffsetDelta: number;
  firstTimestamp: number;
  maxTimestamp: number;
  producerId: bigint;
  transactional: boolean;
  control: boolean;
  logAppendTime: boolean;
  gzip: boolean;
  records: TestRecord[];
}

function varint(value: number): number[] {
  return unsigned(value >= 0 ? value * 2 : -value * 2 - 1);
}

function unsigned(value: number): number[] {
  const bytes: number[] = [];
  let v = value;
  while (v >= 0x80) {
    bytes.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  bytes.push(v);
  return bytes;
}

function bytes(value: Buffer | null): Buffer {
  return value === null ? Buffer.from(varint(-1)) : Buffer.concat([Buffer.from(varint(value.length)), value]);
}

/** A record batch written by hand from the protocol's layout (independent of the code under test). */
function encodeBatch(batch: TestBatch): Buffer {
  const records = batch.records.map((r) => {
    const body = Buffer.concat([
      Buffer.from([0]),
      Buffer.from(varint(r.timestampDelta)),
      Buffer.from(varint(r.offsetDelta)),
      bytes(r.key),
      bytes(r.value),
      Buffer.from(varint(r.headers.length)),
      ...r.headers.map(([name, value]) => Buffer.concat([bytes(Buffer.from(name)), bytes(value)])),
    ]);
    return Buffer.concat([Buffer.from(varint(body.length)), body]);
  });
  const plain = Buffer.concat(records);
  const payload = batch.gzip ? gzipSync(plain) : plain;
  const header = Buffer.alloc(61);
  header.writeBigInt64BE(batch.baseOffset, 0);
  header.writeInt32BE(61 - 12 + payload.length, 8);
  header.writeInt32BE(0, 12);
  header.writeInt8(2, 16);
  const attributes =
    (batch.gzip ? 1 : 0) |
    (batch.logAppendTime ? 0x08 : 0) |
    (batch.transactional ? 0x10 : 0) |
    (batch.control ? 0x20 : 0);
  header.writeInt16BE(attributes, 21);
  header.writeInt32BE(batch.lastOffsetDelta, 23);
  header.writeBigInt64BE(BigInt(batch.firstTimestamp), 27);
  header.writeBigInt64BE(BigInt(batch.maxTimestamp), 35);
  header.writeBigInt64BE(batch.producerId, 43);
  header.writeInt16BE(0, 51);
  header.writeInt32BE(0, 53);
  header.writeInt32BE(batch.records.length, 57);
  const whole = Buffer.concat([header, payload]);
  whole.writeUInt32BE(crc32c(whole, 21), 17);
  return whole;
}

/** What onceflow returned before the lean decoder: kafkajs's decoder, then filter and convert. */
async function reference(
  set: Buffer,
  fetchOffset: bigint,
  aborted: Array<{ producerId: bigint; firstOffset: bigint }>,
): Promise<{ records: RawRecord[]; nextOffset: bigint }> {
  const decoder = new Decoder(set);
  const messages: DecodedMessage[] = [];
  let batchesEnd: bigint | undefined;
  while (decoder.canReadBytes(49)) {
    try {
      const batch = await decodeBatch(decoder);
      messages.push(...batch.records);
      batchesEnd = BigInt(batch.firstOffset) + BigInt(batch.lastOffsetDelta) + 1n;
    } catch (error) {
      if ((error as { name?: unknown }).name === "KafkaJSPartialMessageError") break;
      throw error;
    }
  }
  const list = aborted.map((t) => ({ producerId: String(t.producerId), firstOffset: String(t.firstOffset) }));
  const { records, nextOffset } = recordsFromKafkajs(messages, fetchOffset, list);
  // Also past a last batch that kafkajs decoded no record from.
  return {
    records,
    nextOffset: batchesEnd !== undefined && batchesEnd > nextOffset ? batchesEnd : nextOffset,
  };
}

async function lean(
  set: Buffer,
  fetchOffset: bigint,
  aborted: Array<{ producerId: bigint; firstOffset: bigint }>,
): Promise<{ records: RawRecord[]; nextOffset: bigint }> {
  const decoded = await decodeRecordSet(set, {
    topic: "t",
    partition: 0,
    fetchOffset,
    abortedTransactions: aborted,
  });
  const end = decoded.batchesEnd;
  return {
    records: decoded.records.toArray(),
    nextOffset: end !== undefined && end > fetchOffset ? end : fetchOffset,
  };
}

// Names like Object.prototype's members, repeated names, empty names, non-ASCII.
const headerName = fc.constantFrom(
  "a",
  "b",
  "",
  "valueOf",
  "toString",
  "constructor",
  "hasOwnProperty",
  "é✓",
);
const nullableBytes = fc.option(
  fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b)),
  { freq: 4 },
);
const producerIds = [1n, 2n, 3n, 2n ** 40n];

interface Draft {
  kind: "data" | "commit" | "abort" | "empty";
  producer: number;
  transactional: boolean;
  records: Array<Omit<TestRecord, "offsetDelta"> & { gap: number }>;
  logAppendTime: boolean;
  gzip: boolean;
}

const draftArb: fc.Arbitrary<Draft> = fc.record({
  kind: fc.constantFrom("data", "data", "data", "commit", "abort", "abort", "empty"),
  producer: fc.constantFrom(0, 0, 1, 1, 2, 3),
  transactional: fc.boolean(),
  records: fc.array(
    fc.record({
      gap: fc.constantFrom(0, 0, 0, 1, 3),
      timestampDelta: fc.integer({ min: -5000, max: 2 ** 40 }),
      key: nullableBytes,
      value: nullableBytes,
      headers: fc.array(fc.tuple(headerName, nullableBytes), { maxLength: 4 }),
    }),
    { minLength: 1, maxLength: 5 },
  ),
  logAppendTime: fc.boolean(),
  gzip: fc.boolean(),
});

/** A partition's log: batches laid one after another from `start`. */
function layOut(drafts: Draft[], start: bigint, firstTimestamp: number): TestBatch[] {
  let next = start;
  return drafts.map((draft) => {
    const control = draft.kind === "commit" || draft.kind === "abort";
    let records: TestRecord[];
    if (control) {
      const type = draft.kind === "abort" ? 0 : 1;
      records = [
        {
          offsetDelta: 0,
          timestampDelta: 0,
          key: Buffer.from([0, 0, 0, type]),
          value: Buffer.from([0, 0, 0, 0, 0, 0]),
          headers: [],
        },
      ];
    } else if (draft.kind === "empty") {
      records = [];
    } else {
      let delta = 0;
      records = draft.records.map((r) => {
        delta += r.gap;
        const record = {
          offsetDelta: delta,
          timestampDelta: r.timestampDelta,
          key: r.key,
          value: r.value,
          headers: r.headers,
        };
        delta++;
        return record;
      });
    }
    const lastOffsetDelta =
      records.length === 0 ? draft.records.length : (records.at(-1) as TestRecord).offsetDelta;
    const batch: TestBatch = {
      baseOffset: next,
      lastOffsetDelta,
      firstTimestamp,
      maxTimestamp: firstTimestamp + 7,
      producerId: producerIds[draft.producer] as bigint,
      transactional: control || draft.transactional,
      control,
      logAppendTime: draft.logAppendTime,
      gzip: draft.gzip && !control,
      records,
    };
    next += BigInt(lastOffsetDelta) + 1n;
    return batch;
  });
}

describe("decodeRecordSet", () => {
  it("returns what kafkajs's decoder plus the old filtering returned (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(draftArb, { minLength: 0, maxLength: 10 }),
        fc.constantFrom(0n, 5n, 2n ** 53n - 20n, 2n ** 60n),
        fc.integer({ min: 0, max: 2 ** 41 }),
        fc.nat({ max: 12 }),
        fc.array(fc.tuple(fc.nat({ max: 1 }), fc.nat({ max: 60 })), { maxLength: 4 }),
        fc.nat({ max: 400 }),
        async (drafts, start, firstTimestamp, skip, abortedDrafts, cut) => {
          const batches = layOut(drafts, start, firstTimestamp);
          const whole = Buffer.concat(batches.map(encodeBatch));
          // A partial batch at the end, as a fetch's maxBytes cuts it.
          const set = cut > 0 && cut < whole.length ? whole.subarray(0, whole.length - cut) : whole;
          // Mostly where a batch of that producer starts (as brokers list them), else anywhere.
          const aborted = abortedDrafts.map(([p, at]) => {
            const own = batches.filter((b) => b.producerId === producerIds[p] && !b.control);
            const firstOffset =
              at % 4 !== 0 && own.length > 0
                ? (own[at % own.length] as TestBatch).baseOffset
                : start + BigInt(at);
            return { producerId: producerIds[p] as bigint, firstOffset };
          });
          const fetchOffset = start + BigInt(skip);
          const expected = await reference(set, fetchOffset, aborted);
          const got = await lean(set, fetchOffset, aborted);
          expect(got.nextOffset).toBe(expected.nextOffset);
          expect(got.records.map(viewsOf)).toEqual(expected.records.map(viewsOf));
          // Keys and values lie in the response itself, not in copies (uncompressed).
          const compressed = batches.some((b) => b.gzip);
          for (const r of got.records) if (!compressed) expect(r.data).toBe(set);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("decodes what the record batch encoder writes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            key: fc.option(fc.string(), { nil: null }),
            value: fc.option(fc.string(), { nil: null }),
            timestamp: fc.integer({ min: 0, max: 2 ** 42 }),
            headers: fc.dictionary(
              fc.constantFrom("x", "valueOf", "constructor", "toString", "h"),
              fc.oneof(fc.string(), fc.array(fc.string(), { minLength: 2, maxLength: 3 })),
            ),
          }),
          { minLength: 1, maxLength: 20 },
        ),
        // Small, huge, and across 2^53 (numbers below it, bigints from it on).
        fc.oneof(
          fc.bigInt({ min: 0n, max: 2n ** 31n }),
          fc.bigInt({ min: 0n, max: 2n ** 62n }),
          fc.bigInt({ min: 2n ** 53n - 25n, max: 2n ** 53n + 5n }),
        ),
        async (records, baseOffset) => {
          const batch = encodeRecordBatch(records, 0, {
            producerId: 7n,
            producerEpoch: 0,
            baseSequence: 0,
            transactional: false,
          });
          // The broker assigns the base offset; the CRC does not cover it.
          batch.writeBigInt64BE(baseOffset, 0);
          const { records: gotColumns, batchesEnd } = await decodeRecordSet(batch, {
            topic: "t",
            partition: 0,
            fetchOffset: 0n,
            abortedTransactions: undefined,
          });
          const got = gotColumns.toArray();
          expect(batchesEnd).toBe(baseOffset + BigInt(records.length));
          expect(got.map(viewsOf)).toEqual(
            records.map((r, i) => ({
              // A number where exact (the base offset goes up to 2^62 here), else a bigint.
              offset:
                baseOffset + BigInt(i) <= BigInt(Number.MAX_SAFE_INTEGER)
                  ? Number(baseOffset + BigInt(i))
                  : baseOffset + BigInt(i),
              timestamp: r.timestamp,
              key: r.key === null ? null : Buffer.from(r.key),
              value: r.value === null ? null : Buffer.from(r.value),
              headers: Object.fromEntries(
                Object.entries(r.headers).map(([k, v]) => [
                  k,
                  Array.isArray(v) ? v.map((s) => Buffer.from(s)) : Buffer.from(v),
                ]),
              ),
            })),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it("keeps a header named __proto__ as an own property, as sent", async () => {
    const a = Buffer.from("a");
    const b = Buffer.from("b");
    const batch = encodeBatch({
      baseOffset: 0n,
      lastOffsetDelta: 1,
      firstTimestamp: 1000,
      maxTimestamp: 1000,
      producerId: -1n,
      transactional: false,
      control: false,
      logAppendTime: false,
      gzip: false,
      records: [
        {
          offsetDelta: 0,
          timestampDelta: 0,
          key: null,
          value: a,
          headers: [
            ["__proto__", a],
            ["valueOf", null],
          ],
        },
        {
          offsetDelta: 1,
          timestampDelta: 5,
          key: null,
          value: b,
          headers: [
            ["__proto__", a],
            ["__proto__", b],
          ],
        },
      ],
    });
    const { records: columns } = await decodeRecordSet(batch, {
      topic: "t",
      partition: 0,
      fetchOffset: 0n,
      abortedTransactions: [],
    });
    const records = columns.toArray();
    const [first, second] = records as [RawRecord, RawRecord];
    expect(Object.getPrototypeOf(first.headers)).toBe(Object.prototype);
    expect(Object.keys(first.headers)).toEqual(["__proto__", "valueOf"]);
    expect(Object.getOwnPropertyDescriptor(first.headers, "__proto__")?.value).toEqual(a);
    expect(first.headers.valueOf).toBeNull();
    expect(Object.getOwnPropertyDescriptor(second.headers, "__proto__")?.value).toEqual([a, b]);
    expect(second.timestamp).toBe(1005);
  });

  it("decodes header names right past the name cache (more names than it holds, repeated)", async () => {
    const names = Array.from({ length: 40 }, (_, i) => `name-${i}-${"é".repeat(i % 3)}`);
    const record = (offsetDelta: number, order: string[]): TestRecord => ({
      offsetDelta,
      timestampDelta: 0,
      key: null,
      value: null,
      headers: order.map((name): [string, Buffer] => [name, Buffer.from(name)]),
    });
    const batch = encodeBatch({
      baseOffset: 0n,
      lastOffsetDelta: 2,
      firstTimestamp: 0,
      maxTimestamp: 0,
      producerId: -1n,
      transactional: false,
      control: false,
      logAppendTime: false,
      gzip: false,
      records: [record(0, names), record(1, [...names].reverse()), record(2, names.slice(0, 5))],
    });
    const { records: columns } = await decodeRecordSet(batch, {
      topic: "t",
      partition: 0,
      fetchOffset: 0n,
      abortedTransactions: [],
    });
    const records = columns.toArray();
    for (const [i, r] of records.entries()) {
      const expected = i === 2 ? names.slice(0, 5) : i === 1 ? [...names].reverse() : names;
      expect(Object.keys(r.headers)).toEqual(expected);
      for (const name of expected) expect(r.headers[name]).toEqual(Buffer.from(name));
    }
  });

  it("reads old message set entries (magic 1) through kafkajs's decoder, then record batches", async () => {
    const MessageSet = requireKafkajs("kafkajs/src/protocol/messageSet") as (
      options: Record<string, unknown>,
    ) => {
      buffer: Buffer;
    };
    const legacy = Buffer.from(
      MessageSet({
        messageVersion: 1,
        compression: 0,
        entries: ["m10", "m11", "m12"].map((value, i) => ({ key: `k${i}`, value, timestamp: 1000 + i })),
      }).buffer,
    );
    // The broker's offsets: 10, 11, 12.
    for (let at = 0, offset = 10n; at < legacy.length; offset++) {
      legacy.writeBigInt64BE(offset, at);
      at += 12 + legacy.readInt32BE(at + 8);
    }
    const batch = encodeBatch({
      baseOffset: 13n,
      lastOffsetDelta: 0,
      firstTimestamp: 2000,
      maxTimestamp: 2000,
      producerId: -1n,
      transactional: false,
      control: false,
      logAppendTime: false,
      gzip: false,
      records: [{ offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from("b13"), headers: [] }],
    });
    const { records: columns, batchesEnd } = await decodeRecordSet(Buffer.concat([legacy, batch]), {
      topic: "t",
      partition: 0,
      fetchOffset: 11n,
      abortedTransactions: [],
    });
    const records = columns.toArray();
    expect(
      records
        .map(viewsOf)
        .map((r) => [r.offset, r.timestamp, r.key?.toString(), r.value?.toString(), r.headers]),
    ).toEqual([
      [11, 1001, "k1", "m11", {}],
      [12, 1002, "k2", "m12", {}],
      [13, 2000, undefined, "b13", {}],
    ]);
    expect(batchesEnd).toBe(14n);
  });

  it("holds keys and values as positions in the fetched bytes; views only when asked for", async () => {
    const batch = encodeBatch({
      baseOffset: 0n,
      lastOffsetDelta: 3,
      firstTimestamp: 0,
      maxTimestamp: 0,
      producerId: -1n,
      transactional: false,
      control: false,
      logAppendTime: false,
      gzip: false,
      records: [
        { offsetDelta: 0, timestampDelta: 0, key: Buffer.from("k"), value: Buffer.from("v"), headers: [] },
        { offsetDelta: 1, timestampDelta: 0, key: null, value: Buffer.alloc(0), headers: [] },
        { offsetDelta: 2, timestampDelta: 0, key: Buffer.alloc(0), value: null, headers: [] },
        { offsetDelta: 3, timestampDelta: 0, key: null, value: null, headers: [] },
      ],
    });
    const { records: columns } = await decodeRecordSet(batch, {
      topic: "t",
      partition: 0,
      fetchOffset: 0n,
      abortedTransactions: [],
    });
    const records = columns.toArray();
    expect(records.map((r) => [r.keyLength, r.valueLength])).toEqual([
      [1, 1],
      [-1, 0],
      [0, -1],
      [-1, -1],
    ]);
    const first = records[0] as RawRecord;
    expect(first.data).toBe(batch);
    expect(first.data.toString("utf8", first.keyStart, first.keyStart + first.keyLength)).toBe("k");
    expect(first.data.toString("utf8", first.valueStart, first.valueStart + first.valueLength)).toBe("v");
    expect(records.map(viewsOf).map((r) => [r.key?.toString(), r.value?.toString()])).toEqual([
      ["k", "v"],
      [undefined, ""],
      ["", undefined],
      [undefined, undefined],
    ]);
    // One hidden class: every record has the same fields in the same order.
    for (const r of records) expect(Object.keys(r)).toEqual(Object.keys(first));
  });

  it("makes a record of Buffer views (kafkajs's decoders) that gives them back", () => {
    const response = Buffer.from("..key..value..");
    const key = response.subarray(2, 5);
    const value = response.subarray(7, 12);
    const cases: Array<[Buffer | null, Buffer | null]> = [
      [key, value], // one memory: located in it, no copy
      [Buffer.alloc(1, "k"), Buffer.alloc(1, "v")], // two (unpooled): copied into one Buffer
      [null, value],
      [key, null],
      [null, null],
    ];
    for (const [k, v] of cases) {
      const raw = rawRecordOf({ offset: 7, timestamp: 3, key: k, value: v, headers: NO_HEADERS });
      expect(viewsOf(raw)).toEqual({ offset: 7, timestamp: 3, key: k, value: v, headers: NO_HEADERS });
      expect(Object.keys(raw)).toEqual([
        "offset",
        "timestamp",
        "data",
        "keyStart",
        "keyLength",
        "valueStart",
        "valueLength",
        "headers",
      ]);
    }
    expect(rawRecordOf({ offset: 0, timestamp: 0, key, value, headers: NO_HEADERS }).data.buffer).toBe(
      response.buffer,
    );
  });

  it("holds offsets as numbers where exact, and one past them as bigints", () => {
    expect(rawOffset(0n)).toBe(0);
    expect(rawOffset(BigInt(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(rawOffset(2n ** 53n)).toBe(2n ** 53n);
    expect(rawOffset(-1n)).toBe(-1n);
    expect(offsetAfter(41)).toBe(42n);
    expect(offsetAfter(Number.MAX_SAFE_INTEGER)).toBe(2n ** 53n);
    expect(offsetAfter(2n ** 53n)).toBe(2n ** 53n + 1n);
  });

  it("refuses a batch whose CRC-32C does not match", async () => {
    const batch = encodeBatch({
      baseOffset: 10n,
      lastOffsetDelta: 0,
      firstTimestamp: 1,
      maxTimestamp: 1,
      producerId: -1n,
      transactional: false,
      control: false,
      logAppendTime: false,
      gzip: false,
      records: [{ offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from("hello"), headers: [] }],
    });
    await expect(
      decodeRecordSet(batch, { topic: "t", partition: 3, fetchOffset: 0n, abortedTransactions: [] }),
    ).resolves.toMatchObject({ batchesEnd: 11n });
    batch.writeUInt8((batch.at(-1) as number) ^ 1, batch.length - 1);
    const error = await decodeRecordSet(batch, {
      topic: "t",
      partition: 3,
      fetchOffset: 0n,
      abortedTransactions: [],
    }).catch((e: unknown) => e);
    expect(isOnceflowError(error) && error.code).toBe("SERVICE_UNAVAILABLE");
    expect((error as Error).message).toMatch(/CRC-32C.*t\[3\]|t\[3\].*CRC-32C/);
    // The reader fails on it instead of fetching the same damaged bytes again forever.
    expect((error as { retriable?: unknown }).retriable).toBe(false);
  });
});

describe("header order", () => {
  it("keeps every header in the record's order (names interleaved, repeated, null values) beside the name map", () => {
    const producer = { producerId: 1n, producerEpoch: 0, baseSequence: 0, transactional: false };
    const inOrder: Array<readonly [string, string | null]> = [
      ["rep", "1"],
      ["other", "x"],
      ["rep", null],
      ["rep", "3"],
    ];
    const batch = encodeRecordBatch([{ value: "v", headers: inOrder }], 1_700_000_000_000, producer);
    const [record] = recordsOfBatch(batch);
    const headers = record?.headers as RawHeaders;
    expect(headers[HEADER_LIST]?.map(([name, value]) => [name, value?.toString() ?? null])).toEqual(inOrder);
    expect((headers.rep as Array<Buffer | null>).map((value) => value?.toString() ?? null)).toEqual([
      "1",
      null,
      "3",
    ]);
    // Not an enumerable property: the name map reads as before.
    expect(Object.keys(headers)).toEqual(["rep", "other"]);
  });
});
