import { describe, expect, it } from "vitest";
import { encodeRecordBatch, RecordBatchBuilder } from "../protocol/record-batch-encoder.js";
import { BufferPool } from "./buffer-pool.js";

describe("BufferPool", () => {
  it("hands out power-of-two classes of at least 64 KiB and reuses what was given back", () => {
    const pool = new BufferPool(1024 * 1024);
    const small = pool.take(10);
    const body = pool.take(300_000);
    expect(small.length).toBe(64 * 1024);
    expect(body.length).toBe(512 * 1024);
    // Each owns its memory: never a slice of Node's shared pool.
    expect(body.byteOffset).toBe(0);
    expect(body.buffer.byteLength).toBe(body.length);
    pool.give(body);
    expect(pool.size).toBe(512 * 1024);
    expect(pool.take(262_145)).toBe(body);
    expect(pool.take(262_145)).not.toBe(body);
    expect(pool.size).toBe(0);
  });

  it("keeps no more than its limit, and refuses views and buffers that are not its own sizes", () => {
    const pool = new BufferPool(128 * 1024);
    const a = pool.take(64 * 1024);
    const b = pool.take(64 * 1024);
    const c = pool.take(64 * 1024);
    pool.give(a);
    pool.give(b);
    pool.give(c);
    expect(pool.size).toBe(128 * 1024);
    pool.give(Buffer.allocUnsafeSlow(100_000));
    pool.give(pool.take(128 * 1024).subarray(1));
    expect(pool.size).toBe(128 * 1024);
  });
});

describe("RecordBatchBuilder with a buffer of its own", () => {
  const producer = { producerId: 1n, producerEpoch: 0, baseSequence: 0, transactional: true };

  it("writes into the buffer given, up to the capacity asked for, not the buffer's length", () => {
    const slab = Buffer.alloc(64 * 1024);
    const builder = new RecordBatchBuilder(200, slab);
    expect(builder.tryAppend({ value: "x".repeat(100) }, 0)).toBe(true);
    expect(builder.tryAppend({ value: "y".repeat(100) }, 0)).toBe(false);
    expect(builder.isWrittenIn(slab)).toBe(true);
    const bytes = builder.finish(producer);
    expect(bytes.buffer).toBe(slab.buffer);
    expect(bytes.equals(encodeRecordBatch([{ value: "x".repeat(100) }], 0, producer))).toBe(true);
  });

  it("gives a lone record larger than the capacity a buffer of its own", () => {
    const slab = Buffer.alloc(64 * 1024);
    const builder = new RecordBatchBuilder(100, slab);
    expect(builder.tryAppend({ value: "z".repeat(1000) }, 0)).toBe(true);
    expect(builder.isWrittenIn(slab)).toBe(false);
    expect(builder.finish(producer).buffer).not.toBe(slab.buffer);
  });
});
