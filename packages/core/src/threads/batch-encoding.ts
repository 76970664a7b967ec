import { deserialize, serialize } from "node:v8";
import type { RecordSerializer } from "../runtime/exchange/record-serializer.js";
import type { RecordBatch } from "../runtime/operators/stream-operator.js";

/**
 * Encodes a batch for a channel between subtask threads: with a {@link RecordSerializer}, one
 * buffer holding the batch's split key, timestamps and record lengths (structured-cloned: a few
 * values per batch) followed by every record's bytes; without one, the whole batch as one
 * structured clone. One buffer per batch, exactly its size (a channel message copies the whole
 * ArrayBuffer under it), so a batch crosses as one memcpy.
 *
 * @example
 * ```ts
 * const bytes = encodeRecordBatch({ splitKey: "s", values: ["a"], timestamps: undefined }, undefined);
 * ```
 */
export function encodeRecordBatch(
  batch: RecordBatch,
  serializer: RecordSerializer<unknown> | undefined,
): Uint8Array {
  if (serializer === undefined) {
    return serialize({ splitKey: batch.splitKey, values: batch.values, timestamps: batch.timestamps });
  }
  const count = batch.values.length;
  const records = new Array<Uint8Array>(count);
  const lengths = new Uint32Array(count);
  let payload = 0;
  for (let index = 0; index < count; index++) {
    const bytes = serializer.serialize(batch.values[index]);
    records[index] = bytes;
    lengths[index] = bytes.byteLength;
    payload += bytes.byteLength;
  }
  const header = serialize({ splitKey: batch.splitKey, timestamps: batch.timestamps, lengths });
  const out = Buffer.allocUnsafeSlow(4 + header.byteLength + payload);
  out.writeUInt32LE(header.byteLength, 0);
  out.set(header, 4);
  let offset = 4 + header.byteLength;
  for (const bytes of records) {
    out.set(bytes, offset);
    offset += bytes.byteLength;
  }
  return out;
}

/**
 * Decodes what {@link encodeRecordBatch} made with the same serializer (or none).
 *
 * @example
 * ```ts
 * const batch = decodeRecordBatch(encodeRecordBatch(batch, serializer), serializer);
 * ```
 */
export function decodeRecordBatch(
  bytes: Uint8Array,
  serializer: RecordSerializer<unknown> | undefined,
): RecordBatch {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (serializer === undefined) return deserialize(buffer) as RecordBatch;
  const headerLength = buffer.readUInt32LE(0);
  const header = deserialize(buffer.subarray(4, 4 + headerLength)) as {
    splitKey: string;
    timestamps: Array<number | undefined> | undefined;
    lengths: Uint32Array;
  };
  const values = new Array<unknown>(header.lengths.length);
  let offset = 4 + headerLength;
  for (let index = 0; index < values.length; index++) {
    const end = offset + header.lengths[index]!;
    values[index] = serializer.deserialize(buffer.subarray(offset, end));
    offset = end;
  }
  return { splitKey: header.splitKey, values, timestamps: header.timestamps };
}
