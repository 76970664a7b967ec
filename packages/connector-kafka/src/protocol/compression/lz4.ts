import type { CompressionCodec } from "./compression-codec.js";
import { lazyPackage } from "./native-package.js";

/**
 * lz4, from the `lz4-napi` package (napi-rs, Rust's `lz4_flex`): the LZ4 *frame* format, which
 * Kafka uses for record batches (magic 2). Written as the Java producer writes it: independent
 * blocks of at most 64 KiB, no block or content checksums (the batch's CRC-32C covers the bytes);
 * the Java consumer reads nothing else (it refuses dependent blocks). Frames with checksums are
 * read too.
 */
const lz4Package = lazyPackage<{
  compressFrameSync(data: Uint8Array, options: { contentChecksum: boolean; blockChecksums: boolean }): Buffer;
  decompressFrameSync(data: Uint8Array): Buffer;
}>("lz4", "lz4-napi");

export const lz4: CompressionCodec = {
  name: "lz4",
  id: 3,
  compress: (data) => lz4Package().compressFrameSync(data, { contentChecksum: false, blockChecksums: false }),
  decompress: (data) => lz4Package().decompressFrameSync(data),
};
