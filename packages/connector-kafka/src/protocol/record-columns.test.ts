import { describe, expect, it } from "vitest";
import type { RawRecord } from "./record-batch-decoder.js";
import { NO_HEADERS, RecordColumns } from "./record-columns.js";

function record(
  offset: number | bigint,
  data: Buffer,
  headers: RawRecord["headers"] = NO_HEADERS,
): RawRecord {
  return {
    offset,
    timestamp: 1_700_000_000_000 + Number(offset),
    data,
    keyStart: 0,
    keyLength: Number(offset) % 3 === 0 ? -1 : 1,
    valueStart: 1,
    valueLength: Number(offset) % 5 === 0 ? -1 : data.length - 1,
    headers,
  };
}

describe("RecordColumns", () => {
  it("gives back every record as pushed: offsets (numbers and bigints), timestamps, data, positions, headers", () => {
    const first = Buffer.from("k-first");
    const second = Buffer.from("k-second batch");
    const headers = { trace: Buffer.from("t") };
    // Past the initial capacity, data switching buffers, headers appearing part way.
    const expected: RawRecord[] = [];
    for (let offset = 0; offset < 1000; offset++) {
      const data = offset < 600 ? first : second;
      expected.push(record(offset, data, offset >= 700 && offset % 2 === 0 ? headers : NO_HEADERS));
    }
    expected.push(record(2n ** 60n, second), record(2n ** 60n + 1n, first, headers));
    const columns = RecordColumns.of(expected);

    expect(columns.length).toBe(expected.length);
    expect(columns.toArray()).toEqual(expected);
    expect(columns.recordAt(3).headers).toBe(NO_HEADERS);
    expect(columns.recordAt(700).headers).toBe(headers);
    expect(columns.recordAt(599).data).toBe(first);
    expect(columns.recordAt(600).data).toBe(second);
    expect(columns.offsetAt(1000)).toBe(2n ** 60n);
    expect(columns.offsetAt(999)).toBe(999);
    const payload = expected.reduce(
      (sum, r) => sum + Math.max(r.keyLength, 0) + Math.max(r.valueLength, 0),
      0,
    );
    expect(columns.payloadBytes).toBe(payload);
    columns.release();
  });

  it("recycles released columns empty, and a second release does not hand them out twice", () => {
    const data = Buffer.from("kv");
    const columns = RecordColumns.acquire();
    columns.pushRecord(record(1, data, { h: null }));
    columns.pushRecord(record(2n ** 60n, data));
    columns.release();
    columns.release();

    const reused = RecordColumns.acquire();
    const other = RecordColumns.acquire();
    expect(reused).toBe(columns);
    expect(other).not.toBe(columns);
    expect(reused.length).toBe(0);
    expect(reused.payloadBytes).toBe(0);
    reused.pushRecord(record(7, data));
    // Nothing of the earlier records (their headers, their bigint offsets) is left.
    expect(reused.toArray()).toEqual([record(7, data)]);
    expect(reused.recordAt(0).headers).toBe(NO_HEADERS);
    reused.release();
    other.release();
  });

  it("makes a new object per record handed out, not tied to the columns once released", () => {
    const data = Buffer.from("kvalue");
    const columns = RecordColumns.of([record(1, data), record(2, data)]);
    const handedOut = columns.recordAt(1);
    expect(columns.recordAt(1)).not.toBe(handedOut);
    columns.release();
    const reused = RecordColumns.of([record(9, Buffer.from("other"))]);
    expect(handedOut).toEqual(record(2, data));
    reused.release();
  });
});
