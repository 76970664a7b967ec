import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { crc32c, crc32cJs, nativeCrc32c } from "./crc32c.js";

// The catalogued check value of CRC-32C (CRC-32/ISCSI), and the test vectors of RFC 3720, B.4.
const CHECK_INPUT = Buffer.from("123456789");
const CHECK_VALUE = 0xe3069283;
const RFC3720_VECTORS: [Uint8Array, number][] = [
  [new Uint8Array(32), 0x8a9136aa],
  [new Uint8Array(32).fill(0xff), 0x62a8ab43],
  [Uint8Array.from({ length: 32 }, (_, i) => i), 0x46dd794e],
  [Uint8Array.from({ length: 32 }, (_, i) => 31 - i), 0x113fdb5c],
];

// `@node-rs/crc32` ships prebuilt bindings for these; the lock file installs the one for the
// platform, so on them the native implementation must load (else the fast path is silently lost).
const PREBUILT = new Set(["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"]);

/** A view into the middle of a larger ArrayBuffer, so `byteOffset` is not 0. */
function offsetView(bytes: Uint8Array, before: number, after: number): Uint8Array {
  const backing = new Uint8Array(before + bytes.length + after).fill(0xa5);
  backing.set(bytes, before);
  return backing.subarray(before, before + bytes.length);
}

describe("crc32c implementations", () => {
  it("loads the native implementation where @node-rs/crc32 has a prebuilt binding", () => {
    if (PREBUILT.has(`${process.platform}-${process.arch}`)) expect(nativeCrc32c).toBeTypeOf("function");
  });

  it("give the published check values and 0 for no bytes", () => {
    for (const [input, expected] of RFC3720_VECTORS) {
      expect(crc32cJs(input)).toBe(expected);
      expect(crc32c(input)).toBe(expected);
      if (nativeCrc32c) expect(nativeCrc32c(input)).toBe(expected);
    }
    expect(crc32cJs(CHECK_INPUT)).toBe(CHECK_VALUE);
    expect(crc32c(CHECK_INPUT)).toBe(CHECK_VALUE);
    expect(crc32cJs(new Uint8Array(0))).toBe(0);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    expect(crc32c(CHECK_INPUT, 4, 4)).toBe(0);
    if (nativeCrc32c) {
      expect(nativeCrc32c(CHECK_INPUT)).toBe(CHECK_VALUE);
      expect(nativeCrc32c(new Uint8Array(0))).toBe(0);
      expect(nativeCrc32c(offsetView(CHECK_INPUT, 3, 5))).toBe(CHECK_VALUE);
    }
    expect(crc32cJs(offsetView(CHECK_INPUT, 3, 5))).toBe(CHECK_VALUE);
    // A sub-range given by start and end, on both sides of the native threshold.
    const padded = Buffer.concat([Buffer.alloc(300, 1), CHECK_INPUT, Buffer.alloc(7, 2)]);
    expect(crc32c(padded, 300, 309)).toBe(CHECK_VALUE);
    expect(crc32c(padded, 0, 309)).toBe(crc32cJs(padded.subarray(0, 309)));
  });

  it("agree on random sub-ranges of random views", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3_000, size: "max" }),
        fc.nat(16),
        fc.nat(16),
        fc.nat(),
        fc.nat(),
        (bytes, before, after, a, b) => {
          const view = offsetView(bytes, before, after);
          const x = bytes.length === 0 ? 0 : a % (bytes.length + 1);
          const y = bytes.length === 0 ? 0 : b % (bytes.length + 1);
          const [start, end] = x <= y ? [x, y] : [y, x];
          const expected = crc32cJs(bytes.slice(start, end));
          expect(crc32cJs(view, start, end)).toBe(expected);
          expect(crc32c(view, start, end)).toBe(expected);
          expect(crc32c(view.subarray(start, end))).toBe(expected);
          if (nativeCrc32c) expect(nativeCrc32c(view.subarray(start, end))).toBe(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("agree on large buffers (a Fetch response's worth)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1 << 16, max: 4 << 20 }), fc.nat(31), fc.nat(), (size, start, seed) => {
        const bytes = Buffer.allocUnsafe(size);
        let state = seed | 1;
        for (let i = 0; i < size; i++) {
          state ^= state << 13;
          state ^= state >>> 17;
          state ^= state << 5;
          bytes[i] = state & 0xff;
        }
        const end = size - (seed % 29);
        const expected = crc32cJs(bytes, start, end);
        expect(crc32c(bytes, start, end)).toBe(expected);
        if (nativeCrc32c) expect(nativeCrc32c(bytes.subarray(start, end))).toBe(expected);
      }),
      { numRuns: 12 },
    );
  });
});
