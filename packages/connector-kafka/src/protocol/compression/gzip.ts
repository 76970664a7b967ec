import { gunzipSync, gzipSync } from "node:zlib";
import type { CompressionCodec } from "./compression-codec.js";

/**
 * gzip, from Node's zlib: a gzip stream as the Java producer writes it (deflate level 6, its
 * default). Decoding reads concatenated gzip members too, as Java's GZIPInputStream does.
 */
export const gzip: CompressionCodec = {
  name: "gzip",
  id: 1,
  compress: (data) => gzipSync(data),
  decompress: (data) => gunzipSync(data),
};
