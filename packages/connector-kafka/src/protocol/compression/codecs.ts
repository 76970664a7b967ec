/**
 * The compression codecs of Kafka's record batches, by name and by attribute id: gzip, snappy,
 * lz4 and zstd, shipped with the connector (see each codec's file for its package and framing).
 */
import { COMPRESSION_CODEC_IDS, type CompressionCodec, type CompressionType } from "./compression-codec.js";
import { gzip } from "./gzip.js";
import { lz4 } from "./lz4.js";
import { snappy } from "./snappy.js";
import { zstd } from "./zstd.js";

export {
  type CodecName,
  CodecUnavailableError,
  type CompressionCodec,
  type CompressionType,
} from "./compression-codec.js";

const BY_ID: ReadonlyArray<CompressionCodec | undefined> = [undefined, gzip, snappy, lz4, zstd];

/**
 * The codec of a batch's compression id (its attributes & 7), or `undefined` for an id Kafka does
 * not define (5 to 7).
 *
 * @example
 * ```ts
 * codecOfId(4)?.name; // "zstd"
 * ```
 */
export function codecOfId(id: number): CompressionCodec | undefined {
  return BY_ID[id];
}

/**
 * The codec of a compression type, `undefined` for `none`.
 *
 * @example
 * ```ts
 * codecOfType("lz4")?.id; // 3
 * ```
 */
export function codecOfType(type: CompressionType): CompressionCodec | undefined {
  return type === "none" ? undefined : BY_ID[COMPRESSION_CODEC_IDS[type]];
}

/** The compression types, `none` first. */
export const COMPRESSION_TYPES: readonly CompressionType[] = ["none", "gzip", "snappy", "lz4", "zstd"];

/**
 * Loads the codec of `type` now (its native package), so that a sink whose codec is missing fails
 * at start rather than at its first batch; throws {@link CodecUnavailableError}.
 *
 * @example
 * ```ts
 * loadCodec("snappy"); // throws where the snappy package does not load
 * ```
 */
export function loadCodec(type: CompressionType): void {
  codecOfType(type)?.compress(PROBE);
}

const PROBE = Buffer.from("onceflow");
