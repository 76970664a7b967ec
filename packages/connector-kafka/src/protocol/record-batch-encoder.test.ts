import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ownHeaders } from "../internal/kafkajs/internals.js";
import { crc32c } from "./crc32c.js";
import { recordsOfBatch } from "./record-batch-decoder.js";
import { type BatchRecord, encodeRecordBatch, RecordBatchBuilder } from "./record-batch-encoder.js";

// kafkajs's own encoder and decoder are the reference.
const requireKafkajs = createRequire(import.meta.url);
const { RecordBatch } = requireKafkajs("kafkajs/src/protocol/recordBatch/v0") as {
  RecordBatch(options: Record<string, unknown>): Promise<{ buffer: Buffer }>;
};
const KafkajsRecord = requireKafkajs("kafkajs/src/protocol/recordBatch/record/v0") as (
  options: Record<string, unknown>,
) => unknown;
const kafkajsCrc32c = requireKafkajs("kafkajs/src/protocol/recordBatch/crc32C") as (buffer: Buffer) => number;
const Decoder = requireKafkajs("kafkajs/src/protocol/decoder") as new (buffer: Buffer) => unknown;
const decodeBatch = requireKafkajs("kafkajs/src/protocol/recordBatch/v0/decoder") as (
  decoder: unknown,
) => Promise<{
  firstOffset: string;
  lastOffsetDelta: number;
  firstSequence: number;
  producerId: string;
  producerEpoch: number;
  inTransaction: boolean;
  maxTimestamp: string;
  records: Array<{
    offset: string;
    timestamp: string;
    key: Buffer | null;
    value: Buffer | null;
    headers: Record<string, Buffer | Buffer[]>;
  }>;
}>;

interface Producer {
  producerId: bigint;
  producerEpoch: number;
  baseSequence: number;
  transactional: boolean;
}

/** kafkajs's encoding of the same batch: base timestamp = the first record's, as this encoder does. */
async function kafkajsBatch(
  records: readonly BatchRecord[],
  now: number,
  producer: Producer,
): Promise<Buffer> {
  const timestamps = records.map((r) => (r.timestamp === undefined ? now : Number(r.timestamp)));
  const base = timestamps[0] as number;
  return (
    await RecordBatch({
      records: records.map((r, i) =>
        KafkajsRecord({
          key: r.key,
          value: r.value,
          headers: r.headers,
          offsetDelta: i,
          timestampDelta: (timestamps[i] as number) - base,
        }),
      ),
      firstTimestamp: base,
      maxTimestamp: Math.max(...timestamps),
      partitionLeaderEpoch: -1,
      lastOffsetDelta: records.length - 1,
      transactional: producer.transactional,
      producerId: producer.producerId.toString(),
      producerEpoch: producer.producerEpoch,
      firstSequence: producer.baseSequence,
    })
  ).buffer;
}

const bytesOrText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
);
const record: fc.Arbitrary<BatchRecord> = fc.record(
  {
    key: fc.option(bytesOrText, { nil: null }),
    value: fc.option(fc.oneof(bytesOrText, fc.string({ minLength: 200, maxLength: 20_000 })), { nil: null }),
    headers: fc.dictionary(
      // Not `__proto__` (fast-check draws it now and then): kafkajs's decoder, the reference here,
      // sets the prototype for it; ours reads it as sent (record-batch-decoder.test.ts).
      fc.string({ unit: "grapheme", maxLength: 12 }).filter((name) => name !== "__proto__"),
      fc.oneof(bytesOrText, fc.array(bytesOrText, { minLength: 1, maxLength: 3 })),
      { maxKeys: 4 },
    ),
    // Up to 2^42 ms: deltas of every varlong length, negative ones too.
    timestamp: fc.oneof(
      fc.integer({ min: 0, max: 2 ** 42 }).map(String),
      fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }),
    ),
  },
  { requiredKeys: ["value"] },
);
const producer: fc.Arbitrary<Producer> = fc.record({
  producerId: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }),
  producerEpoch: fc.integer({ min: 0, max: 32_767 }),
  baseSequence: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  transactional: fc.boolean(),
});

describe("encodeRecordBatch", () => {
  it("writes byte for byte what kafkajs's record batch encoder writes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(record, { minLength: 1, maxLength: 60 }),
        producer,
        fc.integer({ min: 0, max: 2 ** 41 }),
        async (records, p, now) => {
          const mine = encodeRecordBatch(records, now, p);
          const theirs = await kafkajsBatch(records, now, p);
          expect(mine.toString("hex")).toBe(theirs.toString("hex"));
        },
      ),
      { numRuns: 400 },
    );
  });

  it("encodes what kafkajs's decoder reads back: records, offsets, timestamps, producer", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 40 }), producer, async (records, p) => {
        const now = 1_750_000_000_000;
        const decoded = await decodeBatch(new Decoder(encodeRecordBatch(records, now, p)));
        expect(decoded.producerId).toBe(p.producerId.toString());
        expect(decoded.producerEpoch).toBe(p.producerEpoch);
        expect(decoded.firstSequence).toBe(p.baseSequence);
        expect(decoded.inTransaction).toBe(p.transactional);
        expect(decoded.lastOffsetDelta).toBe(records.length - 1);
        const timestamps = records.map((r) => (r.timestamp === undefined ? now : Number(r.timestamp)));
        expect(decoded.maxTimestamp).toBe(String(Math.max(...timestamps)));
        expect(decoded.records).toHaveLength(records.length);
        decoded.records.forEach((got, i) => {
          const sent = records[i] as BatchRecord;
          expect(got.offset).toBe(String(i));
          expect(got.timestamp).toBe(String(timestamps[i]));
          expect(got.key).toEqual(sent.key === null || sent.key === undefined ? null : Buffer.from(sent.key));
          expect(got.value).toEqual(sent.value === null ? null : Buffer.from(sent.value));
          const headers: Record<string, Buffer | Buffer[]> = {};
          for (const [name, item] of Object.entries(sent.headers ?? {})) {
            if (item === undefined) continue;
            const values = (Array.isArray(item) ? item : [item]).map((v) => Buffer.from(v));
            headers[name] = values.length === 1 ? (values[0] as Buffer) : values;
          }
          expect(ownHeaders(got.headers)).toEqual(headers);
        });
      }),
      { numRuns: 200 },
    );
  });

  it("takes a record that is larger than the builder's capacity alone, and refuses the next one", async () => {
    const builder = new RecordBatchBuilder(100);
    const large = { value: "x".repeat(5_000) };
    expect(builder.tryAppend(large, 1)).toBe(true);
    expect(builder.tryAppend({ value: "y" }, 1)).toBe(false);
    const p = { producerId: 7n, producerEpoch: 1, baseSequence: 3, transactional: true };
    expect(builder.finish(p).toString("hex")).toBe((await kafkajsBatch([large], 1, p)).toString("hex"));
  });

  it("refuses to finish an empty batch", () => {
    expect(() =>
      new RecordBatchBuilder(100).finish({
        producerId: 1n,
        producerEpoch: 0,
        baseSequence: 0,
        transactional: true,
      }),
    ).toThrow(/at least one record/);
  });
});

describe("recordsOfBatch", () => {
  it("gives back records that encode to the same bytes again (what a producer splitting a batch needs)", () => {
    fc.assert(
      fc.property(fc.array(record, { minLength: 1, maxLength: 40 }), producer, (records, p) => {
        const now = 1_750_000_000_000;
        const batch = encodeRecordBatch(records, now, p);
        const decoded = recordsOfBatch(batch);
        expect(decoded).toHaveLength(records.length);
        const again = decoded.map(
          (r): BatchRecord => ({
            key: r.key,
            value: r.value,
            headers: r.headers as BatchRecord["headers"],
            timestamp: r.timestamp,
          }),
        );
        // A different "now": every timestamp must come from the batch.
        expect(encodeRecordBatch(again, now + 12_345, p).equals(batch)).toBe(true);
        decoded.forEach((got, i) => {
          const sent = records[i] as BatchRecord;
          expect(got.timestamp).toBe(sent.timestamp === undefined ? now : Number(sent.timestamp));
          expect(got.value).toEqual(sent.value === null ? null : Buffer.from(sent.value));
        });
      }),
      { numRuns: 200 },
    );
  });

  it("refuses bytes that are not an uncompressed batch", () => {
    const batch = encodeRecordBatch([{ value: "a" }], 0, {
      producerId: 1n,
      producerEpoch: 0,
      baseSequence: 0,
      transactional: true,
    });
    const gzip = Buffer.from(batch);
    gzip.writeInt16BE(gzip.readInt16BE(21) | 1, 21);
    expect(() => recordsOfBatch(gzip)).toThrow(/not an uncompressed record batch/);
  });
});

describe("crc32c", () => {
  it("matches the published check value and kafkajs's implementation at every offset", () => {
    expect(crc32c(Buffer.from("123456789"))).toBe(0xe3069283);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2_000 }), fc.nat(20), (bytes, skip) => {
        const buffer = Buffer.from(bytes);
        const start = Math.min(skip, buffer.length);
        expect(crc32c(buffer, start)).toBe(kafkajsCrc32c(buffer.subarray(start)));
      }),
      { numRuns: 300 },
    );
  });
});
