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

/**
 * A deserializer that reads the bytes `data[start, end)` where they lie, without a Buffer view of
 * them: the form of the built-in {@link Deserializers} that the source calls.
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * const string: RangeDeserializer<string> = (data, start, end) => data.toString("utf8", start, end);
 * ```
 */
export type RangeDeserializer<T> = (data: Buffer, start: number, end: number) => T;

/**
 * The `deserialize` functions of {@link Deserializers}, each with its {@link RangeDeserializer}: none
 * of them reads its context. Keyed by the function, so a copy of the object still counts.
 */
const builtIns = new WeakMap<Deserializer<unknown>["deserialize"], RangeDeserializer<unknown>>();

/** A built-in deserializer: `deserialize`, and `range` doing the same on `data[start, end)`. */
function builtIn<T>(deserialize: (bytes: Buffer) => T, range: RangeDeserializer<T>): Deserializer<T> {
  builtIns.set(deserialize, range);
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
  return builtIns.has(deserializer.deserialize);
}

/**
 * The {@link RangeDeserializer} of one of {@link Deserializers}; `undefined` for any other
 * deserializer, which gets a Buffer view as its interface says.
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * rangeDeserializerOf(Deserializers.string())?.(Buffer.from("a,b"), 2, 3); // "b"
 * rangeDeserializerOf({ deserialize: (bytes) => bytes.length }); // undefined
 * ```
 */
export function rangeDeserializerOf<T>(deserializer: Deserializer<T>): RangeDeserializer<T> | undefined {
  return builtIns.get(deserializer.deserialize) as RangeDeserializer<T> | undefined;
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
    return builtIn(
      (bytes) => bytes.toString("utf8"),
      (data, start, end) => data.toString("utf8", start, end),
    );
  },
  /** `JSON.parse` of UTF-8 text; invalid JSON is a deserialization error. */
  json<T = unknown>(): Deserializer<T> {
    return builtIn(
      (bytes) => JSON.parse(bytes.toString("utf8")) as T,
      (data, start, end) => JSON.parse(data.toString("utf8", start, end)) as T,
    );
  },
  /** The bytes as they are. */
  buffer(): Deserializer<Buffer> {
    return builtIn(
      (bytes) => bytes,
      (data, start, end) => data.subarray(start, end),
    );
  },
} as const;
