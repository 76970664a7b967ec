/**
 * Turns a record (or part of it) into the bytes of a Kafka key, value or header — Flink's
 * `SerializationSchema`. `null` writes no key (or a tombstone value).
 *
 * @example
 * ```ts
 * const byId: Serializer<Order> = { serialize: (order) => order.id };
 * ```
 */
export interface Serializer<T> {
  serialize(value: T): Buffer | string | null;
}

/**
 * The built-in serializers: text, JSON and raw Buffers.
 *
 * @example
 * ```ts
 * const sink = new KafkaSink<Order>({ brokers, topic: "orders-out", value: Serializers.json() });
 * ```
 */
export const Serializers = {
  /** `String(value)` as UTF-8. */
  string<T = string>(): Serializer<T> {
    return { serialize: (value) => String(value) };
  },
  /** `JSON.stringify(value)` as UTF-8. */
  json<T = unknown>(): Serializer<T> {
    return { serialize: (value) => JSON.stringify(value) };
  },
  /** The Buffer as it is. */
  buffer(): Serializer<Buffer> {
    return { serialize: (value) => value };
  },
} as const;

/** The default value serializer: strings and Buffers as they are, anything else as JSON. */
export function defaultValueSerializer<T>(): Serializer<T> {
  return {
    serialize: (value) =>
      typeof value === "string" || Buffer.isBuffer(value)
        ? (value as string | Buffer)
        : JSON.stringify(value),
  };
}
