import { describe, expect, it } from "vitest";
import { arrayLiteral, copyField } from "./copy-text.js";

describe("COPY text encoding", () => {
  it("escapes the characters COPY treats specially", () => {
    expect(copyField("a\tb\nc\rd\\e", "scalar")).toBe("a\\tb\\nc\\rd\\\\e");
    expect(copyField("\\N", "scalar")).toBe("\\\\N");
  });

  it("writes NULL for null and undefined", () => {
    expect(copyField(null, "scalar")).toBe("\\N");
    expect(copyField(undefined, "array")).toBe("\\N");
  });

  it("writes numbers, bigints, booleans, dates, bytes and JSON", () => {
    expect(copyField(1.5, "scalar")).toBe("1.5");
    expect(copyField(Number.NaN, "scalar")).toBe("NaN");
    expect(copyField(Number.NEGATIVE_INFINITY, "scalar")).toBe("-Infinity");
    expect(copyField(12345678901234567890n, "scalar")).toBe("12345678901234567890");
    expect(copyField(false, "scalar")).toBe("f");
    expect(copyField(new Date(0), "scalar")).toBe("1970-01-01T00:00:00.000Z");
    expect(copyField(Buffer.from([1, 171]), "scalar")).toBe("\\\\x01ab");
    expect(copyField({ a: [1, "x\ty"], b: 2n }, "scalar")).toBe('{"a":[1,"x\\\\ty"],"b":"2"}');
    expect(copyField([1, 2], "scalar")).toBe("[1,2]");
  });

  it("writes array literals for array columns", () => {
    expect(arrayLiteral(["a", null, 'q"', "b\\s"])).toBe('{"a",NULL,"q\\"","b\\\\s"}');
    expect(arrayLiteral([[1, 2], [3]])).toBe('{{"1","2"},{"3"}}');
    expect(copyField(["x\ty"], "array")).toBe('{"x\\ty"}');
  });
});
