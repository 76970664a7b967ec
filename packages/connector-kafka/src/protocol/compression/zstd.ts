import type { CompressionCodec } from "./compression-codec.js";
import { lazyPackage } from "./native-package.js";

/**
 * zstd, from the `@toondepauw/node-zstd` package (napi-rs, Rust's `zstd` over the reference
 * libzstd): written at level 3 (the Java producer's default `compression.zstd.level`); read as a
 * stream, so frames without a content size (as the Java producer's streaming writer makes them)
 * and several frames one after another decode.
 */
const zstdPackage = lazyPackage<{
  Encoder: new (level: number) => { encodeSync(data: Uint8Array): Buffer };
  Decoder: new () => { decodeSync(data: Uint8Array): Buffer };
}>("zstd", "@toondepauw/node-zstd");

/** The Java producer's default zstd level. */
const ZSTD_LEVEL = 3;

let encoder: { encodeSync(data: Uint8Array): Buffer } | undefined;
let decoder: { decodeSync(data: Uint8Array): Buffer } | undefined;

export const zstd: CompressionCodec = {
  name: "zstd",
  id: 4,
  compress: (data) => {
    encoder ??= new (zstdPackage().Encoder)(ZSTD_LEVEL);
    return encoder.encodeSync(data);
  },
  decompress: (data) => {
    decoder ??= new (zstdPackage().Decoder)();
    return decoder.decodeSync(data);
  },
};
