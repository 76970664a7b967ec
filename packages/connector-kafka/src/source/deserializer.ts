/**
 * Where a record came from, given to a {@link Deserializer} so that errors can say it.
 *
 * @example
 * ```ts
 * const where = (c: DeserializationContext) => `${c.topic} partition ${c.partition} offset ${c.offset}`;
 * ```
 */
export interface DeserializationContext {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

/**
 * Turns the bytes of a key, value or header into a value — Flink's `DeserializationSchema`. Throw to
 * reject a record: the source's `onDeserializationError` policy decides what happens next.
 *
 * @example
 * ```ts
 * const upper: Deserializer<string> = { deserialize: (bytes) => bytes.toString("utf8").toUpperCase() };
 * ```
 */
export interface Deserializer<T> {
  deserialize(bytes: Buffer, context: DeserializationContext): T;
}

/** The `deserialize` functions of {@link Deserializers}: none of them reads its context. */
const contextFree = new WeakSet<Deserializer<unknown>["deserialize"]>();

function builtIn<T>(deserialize: (bytes: Buffer) => T): Deserializer<T> {
  contextFree.add(deserialize);
  return { deserialize };
}

/**
 * Whether `deserializer` is one of {@link Deserializers}, whose functions never read the
 * {@link DeserializationContext} (the source then makes one only for a record that fails).
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * ignoresContext(Deserializers.string()); // true
 * ignoresContext({ deserialize: (bytes, context) => [bytes, context] }); // false
 * ```
 */
export function ignoresContext(deserializer: Deserializer<unknown>): boolean {
  return contextFree.has(deserializer.deserialize);
}

/**
 * The built-in deserializers: UTF-8 strings, JSON and raw Buffers.
 *
 * @example
 * ```ts
 * const source = new KafkaSource({ brokers, topics: ["orders"], value: Deserializers.json<Order>() });
 * ```
 */
export const Deserializers = {
  /** UTF-8 text. */
  string(): Deserializer<string> {
    return builtIn((bytes) => bytes.toString("utf8"));
  },
  /** `JSON.parse` of UTF-8 text; invalid JSON is a deserialization error. */
  json<T = unknown>(): Deserializer<T> {
    return builtIn((bytes) => JSON.parse(bytes.toString("utf8")) as T);
  },
  /** The bytes as they are. */
  buffer(): Deserializer<Buffer> {
    return builtIn((bytes) => bytes);
  },
} as const;
