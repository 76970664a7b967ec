import { describe, expect, it } from "vitest";
import {
  decodeDescribeTransactions,
  decodeListTransactions,
  encodeDescribeTransactions,
  encodeListTransactions,
} from "./transactions-protocol.js";

/** Big-endian integer bytes. */
const int16 = (value: number) => Buffer.from([(value >> 8) & 0xff, value & 0xff]);
const int32 = (value: number) => {
  const buffer = Buffer.alloc(4);
  buffer.writeInt32BE(value);
  return buffer;
};
const int64 = (value: bigint) => {
  const buffer = Buffer.alloc(8);
  buffer.writeBigInt64BE(value);
  return buffer;
};
const compact = (text: string) =>
  Buffer.concat([Buffer.from([Buffer.byteLength(text) + 1]), Buffer.from(text)]);

describe("ListTransactions / DescribeTransactions v0 codec", () => {
  it("encodes the request header's tagged fields, compact arrays and the body's tagged fields", () => {
    expect([...encodeListTransactions(["Ongoing"])]).toEqual([
      0, // header tagged fields
      2, // one state filter
      ...compact("Ongoing"),
      1, // no producer id filter
      0, // body tagged fields
    ]);
    expect([...encodeListTransactions([])]).toEqual([0, 1, 1, 0]);
    expect([...encodeDescribeTransactions(["a-0-1", "a-0-2"])]).toEqual([
      0,
      3,
      ...compact("a-0-1"),
      ...compact("a-0-2"),
      0,
    ]);
  });

  it("decodes a ListTransactions response, skipping tagged fields", () => {
    const payload = Buffer.concat([
      Buffer.from([1, 7, 2, 0xaa, 0xbb]), // response header: one tagged field (tag 7, 2 bytes)
      int32(0), // throttle
      int16(0), // error
      Buffer.from([1]), // no unknown state filters
      Buffer.from([3]), // two transactions
      compact("orders-0-1"),
      int64(4001n),
      compact("Ongoing"),
      Buffer.from([0]),
      compact("orders-0-2"),
      int64(4002n),
      compact("CompleteCommit"),
      Buffer.from([0]),
      Buffer.from([0]),
    ]);
    expect(decodeListTransactions(payload)).toEqual({
      errorCode: 0,
      transactions: [
        { transactionalId: "orders-0-1", producerId: "4001", state: "Ongoing" },
        { transactionalId: "orders-0-2", producerId: "4002", state: "CompleteCommit" },
      ],
    });
  });

  it("decodes a DescribeTransactions response with topics and partitions", () => {
    const payload = Buffer.concat([
      Buffer.from([0]),
      int32(0),
      Buffer.from([2]), // one transaction
      int16(0),
      compact("orders-0-1"),
      compact("Ongoing"),
      int32(60_000),
      int64(1_764_400_000_000n),
      int64(4001n),
      int16(3),
      Buffer.from([2]), // one topic
      compact("orders"),
      Buffer.from([3]), // two partitions
      int32(0),
      int32(5),
      Buffer.from([0]),
      Buffer.from([0]),
      Buffer.from([0]),
    ]);
    expect(decodeDescribeTransactions(payload)).toEqual([
      {
        errorCode: 0,
        transactionalId: "orders-0-1",
        state: "Ongoing",
        timeoutMs: 60_000,
        startTimeMs: 1_764_400_000_000,
        producerId: "4001",
        producerEpoch: 3,
        topics: [{ topic: "orders", partitions: [0, 5] }],
      },
    ]);
  });

  it("rejects a truncated response instead of inventing values", () => {
    expect(() => decodeListTransactions(Buffer.from([0, 0, 0]))).toThrow(/truncated/);
  });
});
