import { describe, expect, it } from "vitest";
import { CopyTextBuffer, columnDisplay, copyChunks } from "./copy-buffer.js";
import type { ColumnEncoding } from "./copy-text.js";
import { encodeCopyText } from "./copy-writer.js";

/** The new encoder's bytes for some rows. */
function encoded(
  rows: readonly (readonly unknown[])[],
  encodings: readonly ColumnEncoding[],
  initial?: number,
) {
  const copy = new CopyTextBuffer(initial);
  for (const row of rows) copy.appendRow(row, encodings);
  return copy;
}

/** The string encoder's output (the encoder before CopyTextBuffer) as the bytes the socket got. */
function reference(rows: readonly (readonly unknown[])[], encodings: readonly ColumnEncoding[]): Buffer {
  return Buffer.concat(encodeCopyText(rows, encodings).map((chunk) => Buffer.from(chunk, "utf8")));
}

/** Byte-equal (toEqual walks big Buffers element by element: far too slow here). */
function expectSameBytes(actual: Buffer, expected: Buffer): void {
  if (!actual.equals(expected)) expect(actual.toString("latin1")).toBe(expected.toString("latin1"));
}

const ALL_ESCAPES = "\\\t\n\r";
const emoji = "😀👍🏽🇩🇪";
const cjk = "漢字かなカナ한국어";

const values: unknown[] = [
  null,
  undefined,
  "",
  "plain",
  ALL_ESCAPES,
  `a${ALL_ESCAPES}b${ALL_ESCAPES}`,
  "\\N",
  "\\",
  "trailing\\",
  "nul\u0000inside",
  emoji,
  cjk,
  `${emoji}\t${cjk}\n${emoji}`,
  "lone \ud800 surrogate",
  "é".repeat(70_000),
  0,
  -0,
  1,
  -1,
  9,
  10,
  99,
  100,
  123_456_789,
  -987_654_321,
  2 ** 31,
  -(2 ** 31) - 1,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  1.5,
  -0.000001,
  1e21,
  1e-7,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  0n,
  -12345678901234567890n,
  true,
  false,
  new Date(0),
  new Date("2026-12-01T00:21:49.123Z"),
  Buffer.from([0, 1, 171, 255]),
  new Uint8Array([92, 10]),
  { a: [1, "x\ty"], b: 2n, c: "\\", d: emoji },
  [1, "two", null],
  [],
];

describe("CopyTextBuffer", () => {
  it("writes the same bytes as the string encoder for every kind of value", () => {
    for (const value of values) {
      for (const encoding of ["scalar", "array"] as const) {
        const rows = [[value], [1, value, "x"], [value, value]];
        const widths: ColumnEncoding[][] = [[encoding], ["scalar", encoding, "scalar"], [encoding, encoding]];
        for (const [index, row] of rows.entries()) {
          const encodings = widths[index]!;
          expectSameBytes(encoded([row], encodings).bytes(), reference([row], encodings));
        }
      }
    }
  });

  it("escapes exactly backslash, tab, newline and carriage return; NUL is passed on", () => {
    const copy = encoded([[ALL_ESCAPES, "nul\u0000", "\\N"]], ["scalar", "scalar", "scalar"]);
    expect(copy.bytes().toString("utf8")).toBe("\\\\\\t\\n\\r\tnul\u0000\t\\\\N\n");
    expect(
      encoded([[null, undefined, ""]], ["scalar", "scalar", "scalar"])
        .bytes()
        .toString(),
    ).toBe("\\N\t\\N\t\n");
  });

  it("grows across many rows and past long values, multi-byte text included", () => {
    const rows: unknown[][] = [];
    for (let index = 0; index < 3_000; index++) {
      const text =
        index % 7 === 0 ? `${cjk}\t${index}` : index % 11 === 0 ? emoji.repeat(index) : "p".repeat(100);
      rows.push([index, text, index % 5 === 0 ? null : `k${index}\\`]);
    }
    rows.push([-1, "😀".repeat(200_000), "漢".repeat(300_001)]);
    const encodings = ["scalar", "scalar", "scalar"] as const;
    const copy = encoded(rows, encodings, 16);
    expect(copy.rows).toBe(rows.length);
    expectSameBytes(copy.bytes(), reference(rows, encodings));
    expect(copy.byteLength).toBe(copy.bytes().length);
    expect(copy.capacity).toBeGreaterThanOrEqual(copy.byteLength);
  });

  it("writes an order number first (upsert) and starts over after reset", () => {
    const copy = new CopyTextBuffer(16);
    copy.appendRow(["a"], ["scalar"], 0);
    copy.appendRow(["b\tc"], ["scalar"], 12_345);
    expect(copy.bytes().toString()).toBe("0\ta\n12345\tb\\tc\n");
    copy.reset();
    expect(copy.rows).toBe(0);
    expect(copy.bytes().length).toBe(0);
    copy.appendRow([1, null], ["scalar", "scalar"]);
    expect(copy.bytes().toString()).toBe("1\t\\N\n");
  });

  it("leaves the buffer as it was when a value cannot be encoded", () => {
    const copy = encoded([[1, "ok"]], ["scalar", "scalar"]);
    const broken = {
      toJSON() {
        throw new Error("no JSON");
      },
    };
    expect(() => copy.appendRow([2, broken], ["scalar", "scalar"])).toThrow("no JSON");
    expect(copy.rows).toBe(1);
    expect(copy.bytes().toString()).toBe("1\tok\n");
  });

  it("reads a row back by its line, typed by the column types, for naming a rejected row", () => {
    const copy = new CopyTextBuffer(16);
    copy.appendRow(
      [1, "x\ty\\z", true, Buffer.from([1, 2, 3]), 2.5],
      ["scalar", "scalar", "scalar", "scalar", "scalar"],
      7,
    );
    copy.appendRow(
      [12345678901234567890n, null, false, null, "abc"],
      ["scalar", "scalar", "scalar", "scalar", "scalar"],
      8,
    );
    copy.appendRow(
      [3, `${emoji}\n${cjk}`, true, null, null],
      ["scalar", "scalar", "scalar", "scalar", "scalar"],
      9,
    );
    const displays = ["bigint", "text", "boolean", "bytea", "numeric(10,2)"].map(columnDisplay);
    expect(displays).toEqual(["number", "text", "boolean", "bytes", "number"]);
    expect(copy.rowAt(1, displays, 1)).toEqual([1, "x\ty\\z", true, "<3 bytes>", 2.5]);
    expect(copy.rowAt(2, displays, 1)).toEqual(["12345678901234567890", null, false, null, "abc"]);
    expect(copy.rowAt(3, displays, 1)).toEqual([3, `${emoji}\n${cjk}`, true, null, null]);
    expect(copy.rowAt(3, displays)).toEqual([9, "3", `${emoji}\n${cjk}`, "t", null, null]);
    expect(copy.rowAt(0, displays)).toBeUndefined();
    expect(copy.rowAt(4, displays)).toBeUndefined();
    expect(columnDisplay("integer[]")).toBe("text");
    expect(columnDisplay("character varying(20)")).toBe("text");
  });

  it("cuts the bytes into views of whole rows of about the message size", () => {
    const rows = Array.from({ length: 1000 }, (_, index) => [index, "x".repeat(index % 50)]);
    rows.push([1000, "y".repeat(5_000)]);
    const copy = encoded(rows, ["scalar", "scalar"]);
    const chunks = copyChunks(copy, 1024);
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) {
      expect(chunk.at(-1)).toBe(0x0a);
      expect(chunk.buffer).toBe(copy.bytes().buffer);
    }
    expect(chunks.slice(0, -1).every((chunk) => chunk.length <= 1024)).toBe(true);
    expect(chunks.at(-1)!.length).toBeGreaterThan(5_000);
    expectSameBytes(Buffer.concat(chunks), copy.bytes());
    expect(copyChunks(new CopyTextBuffer())).toEqual([]);
    expect(copyChunks(copy)).toHaveLength(1);
  });
});
