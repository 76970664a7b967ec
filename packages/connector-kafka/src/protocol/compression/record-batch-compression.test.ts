import { isOnceflowError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { KafkaCompressionError } from "../../errors/kafka-compression-error.js";
import { crc32c } from "../crc32c.js";
import { decodeRecordSet, recordsOfBatch, viewsOf } from "../record-batch-decoder.js";
import { encodeRecordBatch } from "../record-batch-encoder.js";
import { codecOfType } from "./codecs.js";
import { type CodecName, CodecUnavailableError, type CompressionCodec } from "./compression-codec.js";
import { lazyPackage } from "./native-package.js";
import { compressRecordBatch } from "./record-batch-compression.js";

const NAMES: readonly CodecName[] = ["gzip", "snappy", "lz4", "zstd"];
const PRODUCER = { producerId: 7n, producerEpoch: 0, baseSequence: 0, transactional: false };
const CONTEXT = { topic: "orders", partition: 3, fetchOffset: 0n, abortedTransactions: undefined };

/** A compressed batch of `count` records placed at `baseOffset`, as a broker stores it. */
function compressedBatch(name: CodecName, baseOffset: bigint, count: number): Buffer {
  const records = Array.from({ length: count }, (_, i) => ({
    key: `k${i}`,
    value: `${name}-value-${i}`,
    headers: { h: `${i}` },
    timestamp: 1_700_000_000_000 + i,
  }));
  const batch = compressRecordBatch(
    encodeRecordBatch(records, 0, PRODUCER),
    codecOfType(name) as CompressionCodec,
  );
  batch.writeBigInt64BE(baseOffset, 0);
  return batch;
}

/** `batch` with its compressed records replaced by `records`, the CRC written again (it holds). */
function withCompressedBytes(batch: Buffer, records: Buffer): Buffer {
  const out = Buffer.concat([batch.subarray(0, 61), records]);
  out.writeInt32BE(out.length - 12, 8);
  out.writeUInt32BE(crc32c(out, 21), 17);
  return out;
}

async function decodeError(set: Buffer): Promise<KafkaCompressionError> {
  const error = await decodeRecordSet(set, CONTEXT).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(KafkaCompressionError);
  return error as KafkaCompressionError;
}

describe("compressed record batches", () => {
  it("decode with every codec, past the fetch offset, keys, values, headers and timestamps intact", async () => {
    for (const name of NAMES) {
      const set = Buffer.concat([compressedBatch(name, 100n, 5), compressedBatch(name, 105n, 3)]);
      const { records, batchesEnd } = await decodeRecordSet(set, { ...CONTEXT, fetchOffset: 102n });
      const got = records.toArray().map(viewsOf);
      records.release();
      expect(batchesEnd).toBe(108n);
      expect(got.map((r) => r.offset)).toEqual([102, 103, 104, 105, 106, 107]);
      expect(got.map((r) => r.value?.toString())).toEqual([
        `${name}-value-2`,
        `${name}-value-3`,
        `${name}-value-4`,
        `${name}-value-0`,
        `${name}-value-1`,
        `${name}-value-2`,
      ]);
      expect(got[0]?.key?.toString()).toBe("k2");
      expect(got[0]?.headers).toEqual({ h: Buffer.from("2") });
      expect(got[0]?.timestamp).toBe(1_700_000_000_002);
    }
  });

  it("set the codec's id in the attributes and a CRC-32C over the compressed bytes", () => {
    for (const name of NAMES) {
      const batch = compressedBatch(name, 0n, 2);
      expect(batch.readInt16BE(21) & 7).toBe(codecOfType(name)?.id);
      expect(batch.readUInt32BE(17)).toBe(crc32c(batch, 21));
      expect(batch.readInt32BE(8)).toBe(batch.length - 12);
      expect(recordsOfBatch(batch).map((r) => r.value?.toString())).toEqual([
        `${name}-value-0`,
        `${name}-value-1`,
      ]);
    }
  });

  it("whose bytes do not decompress fail for good (RECORD_REJECTED, not retriable), naming topic, partition and offset", async () => {
    for (const name of NAMES) {
      const good = compressedBatch(name, 4_200n, 3);
      const garbage = Buffer.from(good.subarray(61));
      garbage.fill(0x5a, Math.floor(garbage.length / 3));
      const error = await decodeError(withCompressedBytes(good, garbage));
      expect(isOnceflowError(error) && error.code).toBe("RECORD_REJECTED");
      expect(error.retriable).toBe(false);
      expect(error.details).toEqual({
        topic: "orders",
        partition: 3,
        offset: "4200",
        codec: name,
        reason: "corrupt",
      });
      expect(error.message).toContain(`offset 4200 of orders[3]`);
      expect(error.message).toContain(name);
    }
  });

  it("of a codec Kafka does not define fail for good (CONFIGURATION), naming the batch", async () => {
    const batch = compressedBatch("gzip", 9n, 1);
    batch.writeInt16BE((batch.readInt16BE(21) & ~7) | 6, 21);
    batch.writeUInt32BE(crc32c(batch, 21), 17);
    const error = await decodeError(batch);
    expect(error.code).toBe("CONFIGURATION");
    expect(error.retriable).toBe(false);
    expect(error.details).toMatchObject({ offset: "9", codec: "unknown (6)", reason: "unavailable" });
  });
});

describe("a codec's package", () => {
  it("that does not load fails each use with an error naming it", () => {
    const load = lazyPackage("zstd", "@onceflow/no-such-codec-package");
    expect(load).toThrow(CodecUnavailableError);
    expect(load).toThrow(/the zstd codec needs the package '@onceflow\/no-such-codec-package'/);
  });
});
