import { describe, expect, it } from "vitest";
import { decodeFetchV11, type FetchResponse, fetchedPartitions, partitionKey } from "./fetch-response.js";
import { type RawRecord, viewsOf } from "./record-batch-decoder.js";
import { encodeRecordBatch } from "./record-batch-encoder.js";

function int16(value: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeInt16BE(value);
  return b;
}
function int32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(value);
  return b;
}
function int64(value: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(value);
  return b;
}

function batchAt(baseOffset: bigint, values: string[], producerId = -1n, transactional = false): Buffer {
  const batch = encodeRecordBatch(
    values.map((value) => ({ value, timestamp: 1_700_000_000_000 })),
    0,
    { producerId, producerEpoch: 0, baseSequence: 0, transactional },
  );
  batch.writeBigInt64BE(baseOffset, 0);
  return batch;
}

interface PartitionSpec {
  partition: number;
  errorCode?: number;
  highWatermark: bigint;
  aborted?: Array<[bigint, bigint]>;
  records: Buffer | null;
}

/** A Fetch v11 response written by hand from the protocol's layout. */
function response(topics: Array<[string, PartitionSpec[]]>): Buffer {
  const parts: Buffer[] = [int32(0), int16(0), int32(0), int32(topics.length)];
  for (const [name, partitions] of topics) {
    parts.push(int16(Buffer.byteLength(name)), Buffer.from(name), int32(partitions.length));
    for (const p of partitions) {
      parts.push(int32(p.partition), int16(p.errorCode ?? 0), int64(p.highWatermark), int64(p.highWatermark));
      parts.push(int64(0n));
      if (p.aborted === undefined) parts.push(int32(-1));
      else {
        parts.push(int32(p.aborted.length));
        for (const [producerId, firstOffset] of p.aborted) parts.push(int64(producerId), int64(firstOffset));
      }
      parts.push(int32(-1));
      if (p.records === null) parts.push(int32(-1));
      else parts.push(int32(p.records.length), p.records);
    }
  }
  return Buffer.concat(parts);
}

const values = (records: RawRecord[]) => records.map((r) => viewsOf(r).value?.toString());

describe("decodeFetchV11", () => {
  it("reads every topic and partition asked for, filtered, with the offset to fetch next", async () => {
    const full = Buffer.concat([batchAt(0n, ["a", "b"]), batchAt(2n, ["c"])]);
    const raw = response([
      [
        "orders",
        [
          // Asked from 1: "a" is below it; the tail batch is cut (partial) and read next time.
          {
            partition: 0,
            highWatermark: 9n,
            records: Buffer.concat([full, batchAt(3n, ["d"]).subarray(0, 30)]),
          },
          { partition: 1, highWatermark: 0n, records: null },
          // Not asked for.
          { partition: 2, highWatermark: 5n, records: batchAt(0n, ["x"]) },
        ],
      ],
      [
        "é-topic",
        [
          {
            partition: 0,
            highWatermark: 7n,
            aborted: [[42n, 5n]],
            records: Buffer.concat([batchAt(5n, ["aborted"], 42n, true), batchAt(6n, ["plain"])]),
          },
        ],
      ],
    ]);
    const requested = new Map([
      [partitionKey("orders", 0), 1n],
      [partitionKey("orders", 1), 4n],
      [partitionKey("é-topic", 0), 5n],
    ]);
    const decoded = (await decodeFetchV11(raw, requested)) as FetchResponse & {
      clientSideThrottleTime: number;
    };
    expect(decoded.clientSideThrottleTime).toBe(0);
    const { fetched } = fetchedPartitions(decoded, requested);
    expect(
      fetched.map((p) => [p.topic, p.partition, values(p.records.toArray()), p.nextOffset, p.highWatermark]),
    ).toEqual([
      ["orders", 0, ["b", "c"], 3n, 9n],
      ["orders", 1, [], 4n, 0n],
      ["é-topic", 0, ["plain"], 7n, 7n],
    ]);
    expect(fetched[0]?.records.toArray().map((r) => r.offset)).toEqual([1, 2]);
    expect(fetched[0]?.records.recordAt(0).timestamp).toBe(1_700_000_000_000);
  });

  it("keeps a partition's error to that partition: the others' records come beside it", async () => {
    const raw = response([
      ["alive", [{ partition: 0, highWatermark: 2n, records: batchAt(0n, ["a", "b"]) }]],
      // UNKNOWN_TOPIC_OR_PARTITION, as a broker answers for a deleted topic.
      ["deleted", [{ partition: 0, errorCode: 3, highWatermark: -1n, records: null }]],
    ]);
    const requested = new Map([
      [partitionKey("alive", 0), 0n],
      [partitionKey("deleted", 0), 100n],
    ]);
    const { fetched, failed } = fetchedPartitions(
      (await decodeFetchV11(raw, requested)) as FetchResponse,
      requested,
    );
    expect(fetched.map((p) => [p.topic, values(p.records.toArray())])).toEqual([["alive", ["a", "b"]]]);
    expect(failed).toEqual([{ topic: "deleted", partition: 0, errorCode: 3 }]);
  });
});
