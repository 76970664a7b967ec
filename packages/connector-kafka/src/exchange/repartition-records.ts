import type { ExchangeControlRecord, ExchangeRecord } from "@onceflow/core";
import type { KafkaSinkHeaders } from "../sink/kafka-sink-options.js";
import type { KafkaRecord } from "../source/kafka-record.js";

/** Header of a control record: `sender,senderParallelism,watermark,idle,ended`. */
export const CONTROL_HEADER = "onceflow-exchange-control";
/** Header of a data record with an event time: its value in decimal. */
export const EVENT_TIME_HEADER = "onceflow-event-time";

/**
 * How values cross the repartition topic: bytes out, value back. The default is JSON, which
 * keeps strings, finite numbers, booleans, `null`, arrays and plain objects; a `Date` comes back
 * as its ISO string, `undefined` fields are dropped, and `bigint`, `Map`, `Set` and `Buffer` need
 * a codec of their own.
 *
 * @example
 * ```ts
 * import { serialize, deserialize } from "node:v8";
 * const v8Codec: RepartitionCodec = { serialize: (value) => serialize(value), deserialize: (bytes) => deserialize(bytes) };
 * ```
 */
export interface RepartitionCodec {
  serialize(value: unknown): Buffer | string;
  deserialize(bytes: Buffer): unknown;
}

/** The default {@link RepartitionCodec}: JSON as UTF-8. */
export const jsonCodec: RepartitionCodec = {
  serialize: (value) => {
    const text = JSON.stringify(value);
    if (text === undefined) {
      throw new TypeError(`a value of type ${typeof value} has no JSON form; give the exchange a codec`);
    }
    return text;
  },
  deserialize: (bytes) => JSON.parse(bytes.toString("utf8")),
};

/** The record key: the key group as two bytes, which the partitioner reads back. */
export function keyGroupKey(record: ExchangeRecord): Buffer {
  const key = Buffer.allocUnsafe(2);
  key.writeUInt16BE(record.keyGroup, 0);
  return key;
}

/** The partition of a record: its key group. */
export function keyGroupOfKey(key: Buffer | null): number {
  if (key === null || key.length !== 2) throw new RangeError("a repartition record without its key group");
  return key.readUInt16BE(0);
}

/** The headers of a record: its control fields, or its event time. */
export function headersOf(record: ExchangeRecord): KafkaSinkHeaders {
  if (record.kind === "control") {
    const { sender, senderParallelism, watermark, idle, ended } = record;
    return [[CONTROL_HEADER, `${sender},${senderParallelism},${watermark},${idle ? 1 : 0},${ended ? 1 : 0}`]];
  }
  return record.timestamp === undefined ? [] : [[EVENT_TIME_HEADER, String(record.timestamp)]];
}

/** A record read from the repartition topic back into what the sending side wrote. */
export function exchangeRecordOf(record: KafkaRecord<Buffer, unknown, string>): ExchangeRecord {
  const keyGroup = record.partition;
  let eventTime: string | undefined;
  for (const [name, value] of record.headerList) {
    if (name === CONTROL_HEADER && value !== null) return controlOf(keyGroup, value);
    if (name === EVENT_TIME_HEADER && value !== null) eventTime = value;
  }
  return {
    kind: "data",
    keyGroup,
    value: record.value,
    timestamp: eventTime === undefined ? undefined : Number(eventTime),
  };
}

function controlOf(keyGroup: number, text: string): ExchangeControlRecord {
  const [sender, senderParallelism, watermark, idle, ended] = text.split(",");
  return {
    kind: "control",
    keyGroup,
    sender: Number(sender),
    senderParallelism: Number(senderParallelism),
    watermark: Number(watermark),
    idle: idle === "1",
    ended: ended === "1",
  };
}
