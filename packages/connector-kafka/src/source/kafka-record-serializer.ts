import { deserialize, serialize } from "node:v8";
import type { RecordSerializer } from "@onceflow/core";
import type { KafkaHeader, KafkaRecord } from "./kafka-record.js";
import { headersByName } from "./record-headers.js";

// How a key, value or header value is written: its kind, then (but for null) a 32-bit length and bytes.
const NULL = 0;
const TEXT = 1;
const BYTES = 2;
// Anything else a deserializer made (JSON objects, numbers…), as a structured clone.
const CLONE = 3;

/**
 * A {@link RecordSerializer} for the records a `KafkaSource` emits, for `keyBy` directly after the
 * source: a `keyBy` between worker threads or processes then moves each record as its bytes —
 * topic, partition, offset, timestamp, key, value and headers in order — instead of a structured
 * clone, several times cheaper for records holding Buffers. Keys, values and header values that are
 * strings or Buffers are written as such (a Buffer arrives as a Buffer over the received bytes);
 * any other value a deserializer made (a parsed JSON object, say) as a structured clone, so every
 * record arrives as it left.
 *
 * @example
 * ```ts
 * job.fromSource(new KafkaSource({ brokers, topics: ["clicks"], value: Deserializers.buffer() }), { uid: "clicks" })
 *   .keyBy((record) => record.key ?? "", { serializer: kafkaRecordSerializer() })
 *   .process(new CountPerUser(), { uid: "counts" });
 * ```
 */
export function kafkaRecordSerializer<K = string, V = string, H = string>(): RecordSerializer<
  KafkaRecord<K, V, H>
> {
  let scratch = Buffer.allocUnsafeSlow(16 * 1024);
  let offset = 0;
  const reserve = (bytes: number): void => {
    if (offset + bytes <= scratch.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(scratch.length * 2, offset + bytes));
    scratch.copy(grown, 0, 0, offset);
    scratch = grown;
  };
  // A batch's records share their topic: its bytes are made once.
  let topic = "";
  let topicBytes = Buffer.alloc(0);
  const writeTopic = (text: string): void => {
    if (text !== topic) {
      topic = text;
      topicBytes = Buffer.from(text, "utf8");
    }
    writeBytes(topicBytes);
  };
  const writeText = (text: string): void => {
    // UTF-8 takes at most three bytes per UTF-16 code unit.
    reserve(4 + text.length * 3);
    const length = scratch.write(text, offset + 4, "utf8");
    scratch.writeUInt32LE(length, offset);
    offset += 4 + length;
  };
  // Offsets are decimal digits, a byte each: written here, not through a call into the runtime.
  const writeDigits = (digits: string): void => {
    reserve(4 + digits.length);
    scratch.writeUInt32LE(digits.length, offset);
    offset += 4;
    for (let index = 0; index < digits.length; index++) scratch[offset++] = digits.charCodeAt(index);
  };
  const writeBytes = (bytes: Uint8Array): void => {
    reserve(4 + bytes.byteLength);
    scratch.writeUInt32LE(bytes.byteLength, offset);
    scratch.set(bytes, offset + 4);
    offset += 4 + bytes.byteLength;
  };
  const writeField = (value: unknown): void => {
    reserve(1);
    if (value === null || value === undefined) {
      scratch[offset++] = NULL;
    } else if (typeof value === "string") {
      scratch[offset++] = TEXT;
      writeText(value);
    } else if (Buffer.isBuffer(value)) {
      scratch[offset++] = BYTES;
      writeBytes(value);
    } else {
      scratch[offset++] = CLONE;
      writeBytes(serialize(value));
    }
  };
  let readTopicBytes = Buffer.alloc(0);
  let readTopicText = "";
  return {
    serialize(record) {
      offset = 0;
      writeTopic(record.topic);
      reserve(12);
      scratch.writeInt32LE(record.partition, offset);
      scratch.writeDoubleLE(record.timestamp, offset + 4);
      offset += 12;
      writeDigits(record.offset);
      writeField(record.key);
      writeField(record.value);
      reserve(4);
      scratch.writeUInt32LE(record.headerList.length, offset);
      offset += 4;
      for (const [name, value] of record.headerList) {
        writeText(name);
        writeField(value);
      }
      const bytes = Buffer.allocUnsafe(offset);
      scratch.copy(bytes, 0, 0, offset);
      return bytes;
    },
    deserialize(bytes) {
      const buffer = Buffer.isBuffer(bytes)
        ? bytes
        : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      let position = 0;
      const readLength = (): number => {
        const length = buffer.readUInt32LE(position);
        position += 4;
        return length;
      };
      const readText = (): string => {
        const length = readLength();
        position += length;
        return buffer.toString("utf8", position - length, position);
      };
      const readField = (): unknown => {
        const kind = buffer[position++];
        if (kind === NULL) return null;
        const length = readLength();
        position += length;
        const field = buffer.subarray(position - length, position);
        if (kind === TEXT) return field.toString("utf8");
        if (kind === BYTES) return field;
        return deserialize(field);
      };
      const topicLength = readLength();
      position += topicLength;
      if (!sameBytes(readTopicBytes, buffer, position - topicLength, topicLength)) {
        readTopicBytes = Buffer.from(buffer.subarray(position - topicLength, position));
        readTopicText = readTopicBytes.toString("utf8");
      }
      const partition = buffer.readInt32LE(position);
      const timestamp = buffer.readDoubleLE(position + 4);
      position += 12;
      // Offsets are decimal digits: one byte per character.
      const offsetLength = readLength();
      position += offsetLength;
      const offsetText = buffer.toString("latin1", position - offsetLength, position);
      const key = readField() as K | null;
      const value = readField() as V | null;
      const headerCount = readLength();
      const headerList: Array<KafkaHeader<H>> = new Array(headerCount);
      for (let index = 0; index < headerCount; index++)
        headerList[index] = [readText(), readField() as H | null];
      return {
        topic: readTopicText,
        partition,
        offset: offsetText,
        timestamp,
        key,
        value,
        headers: headersByName(headerList),
        headerList,
      };
    },
  };
}

/** Whether `buffer[start, start + length)` holds exactly `expected` (short: compared here). */
function sameBytes(expected: Buffer, buffer: Buffer, start: number, length: number): boolean {
  if (expected.length !== length) return false;
  for (let index = 0; index < length; index++) if (expected[index] !== buffer[start + index]) return false;
  return true;
}
