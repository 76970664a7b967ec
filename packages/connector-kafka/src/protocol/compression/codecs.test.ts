import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { codecOfId, codecOfType, loadCodec } from "./codecs.js";
import type { CodecName, CompressionCodec } from "./compression-codec.js";
import { compressXerial, hasXerialMagic } from "./snappy.js";

const NAMES: readonly CodecName[] = ["gzip", "snappy", "lz4", "zstd"];
const codec = (name: CodecName) => codecOfType(name) as CompressionCodec;

/** What fixtures/JavaCompressed.java compressed. */
function javaText(): Buffer {
  let text = "";
  for (let i = 0; i < 4000; i++) text += `record-${i % 100} the same value, written by the Java producer\n`;
  return Buffer.from(text);
}

const javaCompressed = JSON.parse(
  readFileSync(new URL("./fixtures/java-compressed.json", import.meta.url), "utf8"),
) as Record<CodecName, string> & { plainBytes: number };

describe("compression codecs", () => {
  it("are found by name and by their id in the batch attributes", () => {
    expect(NAMES.map((name) => codec(name).id)).toEqual([1, 2, 3, 4]);
    for (const id of [1, 2, 3, 4]) expect(codecOfId(id)?.id).toBe(id);
    expect(codecOfType("none")).toBeUndefined();
    expect([0, 5, 6, 7].map(codecOfId)).toEqual([undefined, undefined, undefined, undefined]);
    for (const name of NAMES) expect(() => loadCodec(name)).not.toThrow();
  });

  it("give back what they compressed, from empty to several blocks of each framing (property)", () => {
    const data = fc.oneof(
      fc.uint8Array({ maxLength: 2_000 }),
      // Compressible and larger than snappy's 32 KiB and lz4's 64 KiB blocks.
      fc
        .tuple(fc.string({ minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 9_000 }))
        .map(([text, times]) => new Uint8Array(Buffer.from(text.repeat(times)))),
    );
    fc.assert(
      fc.property(data, fc.constantFrom(...NAMES), (bytes, name) => {
        const compressed = codec(name).compress(bytes);
        expect(Buffer.compare(codec(name).decompress(compressed), Buffer.from(bytes))).toBe(0);
      }),
      { numRuns: 120 },
    );
  });

  it("read a view into a larger buffer without reading past it", () => {
    for (const name of NAMES) {
      const compressed = codec(name).compress(Buffer.from("a view's bytes only"));
      const around = Buffer.concat([Buffer.from("before"), compressed, Buffer.from("after")]);
      const view = around.subarray(6, 6 + compressed.length);
      expect(codec(name).decompress(view).toString()).toBe("a view's bytes only");
    }
  });

  it("read what the Kafka Java client's codecs wrote (xerial snappy, lz4 frames, zstd without a content size)", () => {
    const text = javaText();
    expect(text.length).toBe(javaCompressed.plainBytes);
    for (const name of NAMES) {
      const bytes = Buffer.from(javaCompressed[name], "base64");
      expect(Buffer.compare(codec(name).decompress(bytes), text), name).toBe(0);
    }
    expect(hasXerialMagic(Buffer.from(javaCompressed.snappy, "base64"))).toBe(true);
  });

  it("fail on corrupt bytes instead of returning something", () => {
    for (const name of NAMES) {
      const compressed = Buffer.from(codec(name).compress(javaText()));
      const cut = compressed.subarray(0, Math.floor(compressed.length / 2));
      expect(() => codec(name).decompress(cut), name).toThrow();
    }
  });
});

describe("snappy framing", () => {
  it("writes snappy-java's stream framing, as the Java producer: header, then length-prefixed blocks of 32 KiB input", () => {
    const data = Buffer.alloc(70_000, "x");
    const framed = codec("snappy").compress(data);
    expect(framed.subarray(0, 16).toString("hex")).toBe("82534e415050590000000001" + "00000001");
    const blocks: number[] = [];
    for (let at = 16; at < framed.length; ) {
      const length = framed.readInt32BE(at);
      blocks.push(length);
      at += 4 + length;
    }
    expect(blocks).toHaveLength(3); // 32 KiB, 32 KiB, the rest
    // The Java producer's own framing of the same kind is identical in layout.
    const java = Buffer.from(javaCompressed.snappy, "base64");
    expect(java.subarray(0, 16).equals(framed.subarray(0, 16))).toBe(true);
  });

  it("reads raw snappy (librdkafka, older clients) and concatenated framed streams", () => {
    const text = javaText();
    // A raw block: the Java consumer reads a buffer without the magic as one block.
    const raw = Buffer.from(javaCompressed.snappy, "base64");
    const firstBlock = raw.subarray(20, 20 + raw.readInt32BE(16));
    expect(codec("snappy").decompress(firstBlock).toString()).toBe(text.subarray(0, 32 * 1024).toString());
    const two = Buffer.concat([compressXerial(Buffer.from("one,")), compressXerial(Buffer.from("two"))]);
    expect(codec("snappy").decompress(two).toString()).toBe("one,two");
  });

  it("refuses a framed block that runs past the end", () => {
    const framed = compressXerial(Buffer.from("0123456789".repeat(100)));
    expect(() => codec("snappy").decompress(framed.subarray(0, framed.length - 3))).toThrow(/runs past/);
  });
});
