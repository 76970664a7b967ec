import { ConfigurationError } from "../errors/onceflow-error.js";
import type { StateKey } from "./keyed-state-backend.js";

/**
 * The number of key groups of a job that sets no `maxParallelism` (Flink's default for a job of up
 * to 128 subtasks).
 *
 * @example
 * ```ts
 * assignToKeyGroup("user-42", DEFAULT_MAX_PARALLELISM); // 20
 * ```
 */
export const DEFAULT_MAX_PARALLELISM = 128;
/** Flink's upper bound for `maxParallelism` (2^15). */
export const UPPER_BOUND_MAX_PARALLELISM = 32_768;

/**
 * The 32-bit hash of a key that decides its key group: the same in every process, Node version and
 * platform, and the same as Java's `hashCode()` of the matching Java value, so that a key lands in
 * the key group Flink would give it:
 *
 * - string: Java's `String.hashCode()` over its UTF-16 code units (`s[0]·31^(n−1) + … + s[n−1]`);
 * - number: a safe integer hashes as a Java `long` (`(int)(v ^ (v >>> 32))`), any other number
 *   (fractions, ±Infinity, NaN, integers beyond 2^53) as a Java `double` (`Double.hashCode`, NaN
 *   canonical); `-0` is `0`;
 * - bigint: its low 64 bits as a Java `long`;
 * - boolean: Java's `Boolean.hashCode()` (1231 for true, 1237 for false).
 *
 * Other values (objects, Buffers, null) are not keys: keyed state compares keys by value, which a
 * Buffer or an object does not; turn them into a string first (`buffer.toString("hex")`).
 *
 * @example
 * ```ts
 * keyHashCode("a"); // 97, as "a".hashCode() in Java
 * ```
 */
export function keyHashCode(key: StateKey): number {
  switch (typeof key) {
    case "string":
      return stringHashCode(key);
    case "number":
      return Number.isSafeInteger(key) ? safeIntegerHashCode(key) : doubleHashCode(key);
    case "bigint":
      return bigintHashCode(key);
    case "boolean":
      return key ? 1231 : 1237;
    default:
      throw new ConfigurationError(
        "keyBy",
        `a key must be a string, number, bigint or boolean, got ${typeof key}`,
      );
  }
}

/**
 * The key group of a key: Flink's `KeyGroupRangeAssignment.assignToKeyGroup` —
 * `murmurHash(hashCode(key)) % maxParallelism`, with Flink's `MathUtils.murmurHash`.
 *
 * @example
 * ```ts
 * assignToKeyGroup("a", 128); // 81, as in Flink for the String key "a"
 * ```
 */
export function assignToKeyGroup(key: StateKey, maxParallelism: number): number {
  return murmurHash(keyHashCode(key)) % maxParallelism;
}

/**
 * The subtask that owns a key group: Flink's `computeOperatorIndexForKeyGroup` —
 * `keyGroup · parallelism / maxParallelism`, rounded down.
 *
 * @example
 * ```ts
 * operatorIndexForKeyGroup(128, 3, 64); // 1
 * ```
 */
export function operatorIndexForKeyGroup(
  maxParallelism: number,
  parallelism: number,
  keyGroup: number,
): number {
  return Math.floor((keyGroup * parallelism) / maxParallelism);
}

/**
 * The contiguous range of key groups a subtask owns, both ends included: Flink's
 * `computeKeyGroupRangeForOperatorIndex`.
 *
 * @example
 * ```ts
 * keyGroupRangeForOperatorIndex(128, 3, 1); // { start: 43, end: 85 }
 * ```
 */
export function keyGroupRangeForOperatorIndex(
  maxParallelism: number,
  parallelism: number,
  operatorIndex: number,
): { readonly start: number; readonly end: number } {
  return {
    start: Math.floor((operatorIndex * maxParallelism + parallelism - 1) / parallelism),
    end: Math.floor(((operatorIndex + 1) * maxParallelism - 1) / parallelism),
  };
}

/**
 * Checks `maxParallelism` against Flink's bounds and the job's parallelism; throws a
 * `ConfigurationError` that says what to change.
 *
 * @example
 * ```ts
 * checkMaxParallelism(128, 4);
 * ```
 */
export function checkMaxParallelism(maxParallelism: number, parallelism: number): void {
  if (
    !Number.isInteger(maxParallelism) ||
    maxParallelism < 1 ||
    maxParallelism > UPPER_BOUND_MAX_PARALLELISM
  ) {
    throw new ConfigurationError(
      "maxParallelism",
      `must be a whole number from 1 to ${UPPER_BOUND_MAX_PARALLELISM}, got ${maxParallelism}`,
    );
  }
  if (parallelism > maxParallelism) {
    throw new ConfigurationError(
      "parallelism",
      `is ${parallelism}, above maxParallelism ${maxParallelism}: every subtask needs at least one key group; lower the parallelism (maxParallelism is fixed for the life of the job)`,
    );
  }
}

// Flink's MathUtils.murmurHash(int): one murmur3 round and its finalizer, made non-negative.
function murmurHash(input: number): number {
  let code = Math.imul(input, 0xcc9e2d51);
  code = (code << 15) | (code >>> 17);
  code = Math.imul(code, 0x1b873593);
  code = (code << 13) | (code >>> 19);
  code = (Math.imul(code, 5) + 0xe6546b64) | 0;
  code ^= 4;
  code ^= code >>> 16;
  code = Math.imul(code, 0x85ebca6b);
  code ^= code >>> 13;
  code = Math.imul(code, 0xc2b2ae35);
  code ^= code >>> 16;
  if (code >= 0) return code;
  return code === -2147483648 ? 0 : -code;
}

function stringHashCode(value: string): number {
  let hash = 0;
  for (let index = 0; index < value.length; index++)
    hash = (Math.imul(31, hash) + value.charCodeAt(index)) | 0;
  return hash;
}

// Java's Long.hashCode: the low 32 bits xor the high 32 bits (ToInt32 is modular, so `| 0` gives
// the low word of a negative number's two's complement too).
function safeIntegerHashCode(value: number): number {
  return (value | 0) ^ (Math.floor(value / 4_294_967_296) | 0);
}

function bigintHashCode(value: bigint): number {
  const bits = BigInt.asUintN(64, value);
  return Number(BigInt.asIntN(32, bits ^ (bits >> 32n)));
}

const doubleView = new DataView(new ArrayBuffer(8));

function doubleHashCode(value: number): number {
  // Java's doubleToLongBits: every NaN is the canonical 0x7ff8000000000000.
  if (Number.isNaN(value)) return 0x7ff80000;
  doubleView.setFloat64(0, value);
  return doubleView.getInt32(0) ^ doubleView.getInt32(4);
}
