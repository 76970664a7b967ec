import { describe, expect, it } from "vitest";
import { encodeCopyText } from "./copy-writer.js";

describe("encodeCopyText", () => {
  it("writes one line per row, tab between fields, escaped", () => {
    expect(
      encodeCopyText(
        [
          [1, "a\tb", null],
          [2, "c", true],
        ],
        ["scalar", "scalar", "scalar"],
      ),
    ).toEqual(["1\ta\\tb\t\\N\n2\tc\tt\n"]);
  });

  it("cuts the text into chunks of about 256 KiB that never split a row", () => {
    const payload = "x".repeat(1000);
    const rows = Array.from({ length: 1000 }, (_, index) => [index, payload]);
    const chunks = encodeCopyText(rows, ["scalar", "scalar"]);
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) {
      expect(chunk.endsWith("\n")).toBe(true);
      expect(chunk.length).toBeLessThan(256 * 1024 + 1100);
    }
    const lines = chunks.join("").split("\n");
    expect(lines.pop()).toBe("");
    expect(lines).toEqual(rows.map(([index]) => `${index}\t${payload}`));
  });

  it("encodes no rows as no chunks", () => {
    expect(encodeCopyText([], ["scalar"])).toEqual([]);
  });
});
