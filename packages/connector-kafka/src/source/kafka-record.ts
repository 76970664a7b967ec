/**
 * One record read by a {@link KafkaSource}: its coordinates, the Kafka timestamp and the deserialized
 * key, value and headers. `key` and `value` are `null` when the record has none (a tombstone).
 *
 * @example
 * ```ts
 * job.fromSource(source, { uid: "orders" }).map((record: KafkaRecord<string, Order>) => record.value);
 * ```
 */
export interface KafkaRecord<K = string, V = string, H = string> {
  readonly topic: string;
  readonly partition: number;
  /** The record's offset (a decimal string: offsets are 64-bit). */
  readonly offset: string;
  /** The record's Kafka timestamp in ms since the epoch (create time or log-append time). */
  readonly timestamp: number;
  readonly key: K | null;
  readonly value: V | null;
  /**
   * Header values; a header that occurs several times gives an array. A header sent without a value
   * (Kafka allows a null header value) is `null`, never passed to the headers deserializer.
   */
  readonly headers: Readonly<Record<string, H | null | Array<H | null>>>;
}
