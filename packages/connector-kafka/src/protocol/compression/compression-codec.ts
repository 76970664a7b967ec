/**
 * What a compression codec of Kafka's record batches is: the batch's records (everything after the
 * 61-byte header) compressed as one block, the codec named by the low three bits of the batch's
 * attributes, as the Java client writes them.
 */

/**
 * A compression type by the Java producer's `compression.type` names (`none` writes uncompressed
 * batches).
 *
 * @example
 * ```ts
 * const compression: CompressionType = "zstd";
 * ```
 */
export type CompressionType = "none" | "gzip" | "snappy" | "lz4" | "zstd";

/** The compression types that compress, by their id in the batch attributes. */
export const COMPRESSION_CODEC_IDS = { gzip: 1, snappy: 2, lz4: 3, zstd: 4 } as const;

/** A compression type that compresses. */
export type CodecName = keyof typeof COMPRESSION_CODEC_IDS;

/** One codec: synchronous, since a batch is decoded and sealed synchronously. */
export interface CompressionCodec {
  readonly name: CodecName;
  /** Its id in a batch's attributes. */
  readonly id: number;
  /** `data` compressed as the Java producer writes this codec (the Java consumer reads it). */
  compress(data: Uint8Array): Buffer;
  /** The bytes `data` holds compressed, in every framing the Java consumer reads. */
  decompress(data: Uint8Array): Buffer;
}

/** A codec's native package that is not installed or does not load on this platform. */
export class CodecUnavailableError extends Error {
  constructor(
    readonly codec: string,
    readonly packageName: string,
    cause: unknown,
  ) {
    super(
      `the ${codec} codec needs the package '${packageName}', which did not load (${cause instanceof Error ? cause.message : String(cause)})`,
      { cause },
    );
    this.name = "CodecUnavailableError";
  }
}
