import type { KafkaHeader } from "./kafka-record.js";

/** The `headers` of a record without headers (shared: a record's headers are read-only). */
export const NO_RECORD_HEADERS: Readonly<Record<string, never>> = Object.freeze({});

/**
 * The `headers` of a record from its `headerList`: each name once, a repeated name's values as an
 * array in order.
 *
 * @example
 * ```ts
 * headersByName([["trace", "a"], ["tag", "x"], ["tag", "y"]]); // { trace: "a", tag: ["x", "y"] }
 * ```
 */
export function headersByName<H>(
  headerList: ReadonlyArray<KafkaHeader<H>>,
): Record<string, H | null | Array<H | null>> {
  if (headerList.length === 0) return NO_RECORD_HEADERS;
  const headers: Record<string, H | null | Array<H | null>> = {};
  const byName = new Map<string, Array<H | null>>();
  for (const [name, value] of headerList) {
    const values = byName.get(name);
    if (values === undefined) byName.set(name, [value]);
    else values.push(value);
  }
  for (const [name, values] of byName) {
    // defineProperty: a header named `__proto__` is a header, not the object's prototype.
    Object.defineProperty(headers, name, {
      value: values.length === 1 ? values[0] : values,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return headers;
}
