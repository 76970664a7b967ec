/**
 * One header of a Kafka record: its name and its value, `null` for a header sent without a value.
 *
 * @example
 * ```ts
 * const header: KafkaHeader = ["trace-id", "4bf92f35"];
 * ```
 */
export type KafkaHeader<H = string> = readonly [name: string, value: H | null];

/**
 * One record read by a {@link KafkaSource}: its coordinates, the Kafka timestamp and the deserialized
 * key, value and headers (by name in `headers`, in order in `headerList`). `key` and `value` are `null` when the record has none (a tombstone).
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
  /**
   * Every header in the record's order, as Kafka keeps them (the Java client's `Headers`): a name
   * repeated as often as it occurs, interleaved with others as written, a value-less header `null`.
   * Hand it to a `KafkaSink`'s `headers` to write the headers on unchanged (with
   * `Deserializers.buffer()` for the bytes as they are).
   */
  readonly headerList: ReadonlyArray<KafkaHeader<H>>;
}
