import { deserialize, serialize } from "node:v8";

/**
 * Turns values of one type into bytes and back, for state and checkpoints.
 *
 * @example
 * ```ts
 * const jsonSerializer: TypeSerializer<{ id: string }> = {
 *   serialize: (value) => Buffer.from(JSON.stringify(value)),
 *   deserialize: (bytes) => JSON.parse(bytes.toString()),
 * };
 * ```
 */
export interface TypeSerializer<T> {
  serialize(value: T): Buffer;
  deserialize(bytes: Buffer): T;
}

/**
 * The default serializer: Node's structured-clone format (`node:v8`). It keeps Buffer, Map, Set,
 * bigint, Date, typed arrays and plain objects; class instances come back as plain objects, so
 * give a serializer of your own for those.
 *
 * @example
 * ```ts
 * const bytes = defaultSerializer.serialize(new Map([["a", 1n]]));
 * defaultSerializer.deserialize(bytes); // Map { "a" => 1n }
 * ```
 */
export const defaultSerializer: TypeSerializer<unknown> = {
  serialize: (value) => serialize(value),
  deserialize: (bytes) => deserialize(bytes),
};

/**
 * The default serializer typed for `T`.
 *
 * @example
 * ```ts
 * const serializer = defaultSerializerFor<number[]>();
 * ```
 */
export function defaultSerializerFor<T>(): TypeSerializer<T> {
  return defaultSerializer as TypeSerializer<T>;
}

/**
 * A JSON serializer, for state that must stay readable or portable.
 *
 * @example
 * ```ts
 * const serializer = jsonSerializer<{ total: number }>();
 * ```
 */
export function jsonSerializer<T>(): TypeSerializer<T> {
  return {
    serialize: (value) => Buffer.from(JSON.stringify(value)),
    deserialize: (bytes) => JSON.parse(bytes.toString("utf8")) as T,
  };
}
