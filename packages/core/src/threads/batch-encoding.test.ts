import { describe, expect, it } from "vitest";
import type { RecordSerializer } from "../runtime/exchange/record-serializer.js";
import { decodeRecordBatch, encodeRecordBatch } from "./batch-encoding.js";

const pointSerializer: RecordSerializer<unknown> = {
  serialize: (value) => {
    const { x, y } = value as { x: number; y: string };
    return Buffer.from(`${x}:${y}`);
  },
  deserialize: (bytes) => {
    const [x, y] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString().split(":");
    return { x: Number(x), y };
  },
};

describe("record batches between subtask threads", () => {
  it("arrive as they left, with the keyBy's serializer: values, split key and event times", () => {
    const batch = {
      splitKey: "clicks/3",
      values: [
        { x: 1, y: "a" },
        { x: 2, y: "ü€" },
        { x: 3, y: "" },
      ],
      timestamps: [10, undefined, 30],
    };
    expect(decodeRecordBatch(encodeRecordBatch(batch, pointSerializer), pointSerializer)).toEqual(batch);
  });

  it("hand each record's deserialize exactly the bytes its serialize made", () => {
    const seen: string[] = [];
    const recording: RecordSerializer<unknown> = {
      serialize: (value) => Buffer.from(String(value)),
      deserialize: (bytes) => {
        const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString();
        seen.push(text);
        return text;
      },
    };
    const values = ["", "a", "bb", "", "cccc"];
    const decoded = decodeRecordBatch(
      encodeRecordBatch({ splitKey: "s", values, timestamps: undefined }, recording),
      recording,
    );
    expect(seen).toEqual(values);
    expect(decoded).toEqual({ splitKey: "s", values, timestamps: undefined });
  });

  it("without a serializer keep Buffers, Dates, Maps and bigints as structured clones", () => {
    const batch = {
      splitKey: "s",
      values: [Buffer.from("bytes"), new Date(5), new Map([["k", 1n]])],
      timestamps: undefined,
    };
    const decoded = decodeRecordBatch(encodeRecordBatch(batch, undefined), undefined);
    expect(decoded).toEqual(batch);
    expect(Buffer.isBuffer(decoded.values[0])).toBe(true);
  });

  it("encode an empty batch", () => {
    const batch = { splitKey: "s", values: [], timestamps: [] };
    expect(decodeRecordBatch(encodeRecordBatch(batch, pointSerializer), pointSerializer)).toEqual(batch);
  });

  it("are one buffer of their own, so the channel transfers it instead of copying", () => {
    const bytes = encodeRecordBatch(
      { splitKey: "s", values: [{ x: 1, y: "a" }], timestamps: undefined },
      pointSerializer,
    );
    expect(bytes.byteOffset).toBe(0);
    expect(bytes.byteLength).toBe(bytes.buffer.byteLength);
  });
});
