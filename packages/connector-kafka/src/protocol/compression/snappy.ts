import type { CompressionCodec } from "./compression-codec.js";
import { lazyPackage } from "./native-package.js";

/**
 * snappy, from the `snappy` package (napi-rs, Rust's `snap`) for the raw blocks, framed here.
 *
 * The Java producer writes snappy-java's stream framing ("xerial"): a 16-byte header (the magic
 * `\x82SNAPPY\0`, a version and a compatible version, int32 each) and then blocks of an int32
 * length and a raw snappy block of at most 32 KiB of input. librdkafka and older clients write one
 * raw snappy block. The Java consumer reads both (snappy-java's stream reads a buffer without the
 * magic as one raw block), and so does {@link snappy}.decompress; it writes the xerial framing.
 */
const snappyPackage = lazyPackage<{
  compressSync(input: Uint8Array, options: { copyOutputData: true }): Buffer;
  uncompressSync(input: Uint8Array, options: { asBuffer: true; copyOutputData: true }): Buffer;
}>("snappy", "snappy");

/**
 * Results copied into ordinary buffers rather than handed over as external ones: an external buffer
 * per block costs a finalizer, and with thousands of batches a second those made decoding several
 * times slower than the copy.
 */
const DECODE = { asBuffer: true, copyOutputData: true } as const;
const ENCODE = { copyOutputData: true } as const;

/** snappy-java's stream header: the magic, then version 1 and compatible version 1. */
const XERIAL_HEADER = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]);
/** The magic only: what tells the framing apart (versions are not checked, as snappy-java does not). */
const XERIAL_MAGIC_BYTES = 8;
/** snappy-java's default block size, which the Java producer uses. */
const XERIAL_BLOCK_BYTES = 32 * 1024;

/** Whether `data` starts with snappy-java's stream magic at `at`. */
export function hasXerialMagic(data: Uint8Array, at = 0): boolean {
  if (data.length - at < XERIAL_HEADER.length) return false;
  for (let i = 0; i < XERIAL_MAGIC_BYTES; i++) if (data[at + i] !== XERIAL_HEADER[i]) return false;
  return true;
}

/** `data` in snappy-java's stream framing, as the Java producer writes it. */
export function compressXerial(data: Uint8Array): Buffer {
  const { compressSync } = snappyPackage();
  const parts: Uint8Array[] = [XERIAL_HEADER];
  for (let start = 0; start < data.length; start += XERIAL_BLOCK_BYTES) {
    const block = compressSync(
      data.subarray(start, Math.min(data.length, start + XERIAL_BLOCK_BYTES)),
      ENCODE,
    );
    const length = Buffer.allocUnsafe(4);
    length.writeInt32BE(block.length);
    parts.push(length, block);
  }
  return Buffer.concat(parts);
}

/** Raw snappy, or snappy-java's stream framing (several streams one after another included). */
function decompressSnappy(data: Uint8Array): Buffer {
  const { uncompressSync } = snappyPackage();
  if (!hasXerialMagic(data)) return uncompressSync(data, DECODE);
  const view = Buffer.from(data.buffer, data.byteOffset, data.length);
  const blocks: Buffer[] = [];
  let at = 0;
  while (at < view.length) {
    // snappy-java reads on into a stream written after this one (its header again).
    if (hasXerialMagic(view, at)) {
      at += XERIAL_HEADER.length;
      continue;
    }
    if (view.length - at < 4) throw new Error(`a snappy block length cut short at byte ${at}`);
    const length = view.readInt32BE(at);
    at += 4;
    if (length < 0 || at + length > view.length) {
      throw new Error(`a snappy block of ${length} bytes at byte ${at} runs past the ${view.length} bytes`);
    }
    blocks.push(uncompressSync(view.subarray(at, at + length), DECODE));
    at += length;
  }
  return blocks.length === 1 ? (blocks[0] as Buffer) : Buffer.concat(blocks);
}

/** snappy: the Java producer's framing written, raw and framed read. */
export const snappy: CompressionCodec = {
  name: "snappy",
  id: 2,
  compress: compressXerial,
  decompress: decompressSnappy,
};
