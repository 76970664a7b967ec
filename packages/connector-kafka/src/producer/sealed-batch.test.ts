import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { recordsOfBatch } from "../protocol/record-batch-decoder.js";
import { type BatchRecord, encodeRecordBatch } from "../protocol/record-batch-encoder.js";
import {
  ATTRIBUTES_OFFSET,
  BASE_SEQUENCE_OFFSET,
  COUNT_OFFSET,
  PRODUCER_EPOCH_OFFSET,
  PRODUCER_ID_OFFSET,
  TRANSACTIONAL_FLAG,
} from "../protocol/record-batch-layout.js";
import { messagesOfBatch, nextSequence, type SealedBatch, splitInHalves } from "./sealed-batch.js";

const producer = { producerId: 4001n, producerEpoch: 7 };
const MAX_SEQUENCE = 0x7fffffff;

function sealed(records: readonly BatchRecord[], baseSequence: number, transactional = true): SealedBatch {
  const bytes = encodeRecordBatch(records, 1_700_000_000_000, {
    ...producer,
    baseSequence,
    transactional,
  });
  return { bytes, slab: undefined, count: records.length, baseSequence, attempts: 2 };
}

/** What a reader sees of a record: its bytes and its timestamp. */
function seen(batch: Buffer) {
  return recordsOfBatch(batch).map((record) => ({
    key: record.key?.toString("hex") ?? null,
    value: record.value?.toString("hex") ?? null,
    headers: record.headers === undefined ? undefined : JSON.stringify(record.headers),
    timestamp: record.timestamp,
  }));
}

describe("nextSequence", () => {
  it("counts on and wraps to 0 after 2^31 - 1, as Kafka does", () => {
    expect(nextSequence(10, 5)).toBe(15);
    expect(nextSequence(MAX_SEQUENCE - 1, 1)).toBe(MAX_SEQUENCE);
    expect(nextSequence(MAX_SEQUENCE, 1)).toBe(0);
    expect(nextSequence(MAX_SEQUENCE - 1, 3)).toBe(1);
  });

  it("matches (sequence + increment) mod 2^31", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: MAX_SEQUENCE }),
        fc.integer({ min: 0, max: 100_000 }),
        (sequence, increment) => {
          expect(nextSequence(sequence, increment)).toBe((sequence + increment) % 2 ** 31);
        },
      ),
    );
  });
});

describe("splitInHalves", () => {
  const records = (count: number): BatchRecord[] =>
    Array.from({ length: count }, (_, index) => ({
      key: index % 3 === 0 ? null : `key-${index}`,
      value: Buffer.from(`value-${index}`.repeat(index + 1)),
      headers: index % 2 === 0 ? { trace: `t${index}`, many: ["a", "b"] } : {},
      // Timestamps out of order and far apart: each half gets a new base timestamp.
      timestamp: String(1_700_000_000_000 + (index % 2 === 0 ? index * 86_400_000 : -index)),
    }));

  it("keeps every record, its bytes and timestamp, in order, and the sequence range across the wrap", () => {
    const refused = sealed(records(5), MAX_SEQUENCE - 1);
    const [first, second] = splitInHalves(refused, producer);
    expect([first.count, second.count]).toEqual([3, 2]);
    // The first half takes the refused batch's base sequence, the second the rest (wrapped).
    expect([first.baseSequence, second.baseSequence]).toEqual([MAX_SEQUENCE - 1, 1]);
    expect(first.bytes.readInt32BE(BASE_SEQUENCE_OFFSET)).toBe(MAX_SEQUENCE - 1);
    expect(second.bytes.readInt32BE(BASE_SEQUENCE_OFFSET)).toBe(1);
    for (const half of [first, second]) {
      expect(half.bytes.readBigInt64BE(PRODUCER_ID_OFFSET)).toBe(producer.producerId);
      expect(half.bytes.readInt16BE(PRODUCER_EPOCH_OFFSET)).toBe(producer.producerEpoch);
      expect(half.bytes.readInt32BE(COUNT_OFFSET)).toBe(half.count);
      // A fresh batch: not pooled, never sent.
      expect(half.slab).toBeUndefined();
      expect(half.attempts).toBe(0);
    }
    expect([...seen(first.bytes), ...seen(second.bytes)]).toEqual(seen(refused.bytes));
  });

  it("splits any batch of two or more records into halves that hold exactly its records", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 0, max: MAX_SEQUENCE }),
        (count, base) => {
          const refused = sealed(records(count), base);
          const [first, second] = splitInHalves(refused, producer);
          expect(first.count + second.count).toBe(count);
          expect(first.count - second.count).toBeGreaterThanOrEqual(0);
          expect(first.count - second.count).toBeLessThanOrEqual(1);
          expect(second.baseSequence).toBe(nextSequence(base, first.count));
          expect([...seen(first.bytes), ...seen(second.bytes)]).toEqual(seen(refused.bytes));
        },
      ),
      { numRuns: 50 },
    );
  });

  it("keeps the refused batch's transactional bit: set in a transaction, clear for an idempotent producer", () => {
    const isTransactional = (batch: SealedBatch) =>
      (batch.bytes.readInt16BE(ATTRIBUTES_OFFSET) & TRANSACTIONAL_FLAG) !== 0;
    for (const transactional of [true, false]) {
      const refused = sealed(records(4), 12, transactional);
      expect(isTransactional(refused)).toBe(transactional);
      expect(splitInHalves(refused, producer).map(isTransactional)).toEqual([transactional, transactional]);
    }
  });

  it("refuses a batch of one record: only the producer can fail it", () => {
    expect(() => splitInHalves(sealed(records(1), 0), producer)).toThrow(/cannot be split/);
  });
});

describe("messagesOfBatch", () => {
  it("gives the records back as messages with explicit timestamps", () => {
    const batch = sealed(records2(), 0).bytes;
    const messages = messagesOfBatch(batch);
    expect(
      messages.map((message) => [
        message.key?.toString() ?? null,
        message.value?.toString(),
        message.timestamp,
      ]),
    ).toEqual([
      [null, "a", "1700000000000"],
      ["k", "b", "1700000000005"],
    ]);
  });
});

function records2(): BatchRecord[] {
  return [
    { value: "a", timestamp: "1700000000000" },
    { key: "k", value: "b", timestamp: "1700000000005" },
  ];
}
