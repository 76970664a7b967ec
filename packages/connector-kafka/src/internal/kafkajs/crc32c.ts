/**
 * CRC-32C (Castagnoli), the checksum of Kafka's record batches (magic 2), in plain JavaScript:
 * slicing-by-8 over eight 256-entry tables, about eight times faster than kafkajs's byte-at-a-time
 * loop. A native implementation (for example `@node-rs/crc32`'s `crc32c`, hardware CRC32 on x86 and
 * ARM) would plug in at {@link crc32c}; it is not a dependency today.
 */

const POLYNOMIAL = 0x82f63b78; // Castagnoli, reflected

const TABLES: readonly Int32Array[] = (() => {
  const tables = Array.from({ length: 8 }, () => new Int32Array(256));
  const first = tables[0] as Int32Array;
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLYNOMIAL : c >>> 1;
    first[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = first[n] as number;
    for (let t = 1; t < 8; t++) {
      c = (first[c & 0xff] as number) ^ (c >>> 8);
      (tables[t] as Int32Array)[n] = c;
    }
  }
  return tables;
})();
const [T0, T1, T2, T3, T4, T5, T6, T7] = TABLES as [
  Int32Array,
  Int32Array,
  Int32Array,
  Int32Array,
  Int32Array,
  Int32Array,
  Int32Array,
  Int32Array,
];

/**
 * The CRC-32C of `bytes[start, end)`, as an unsigned 32-bit number.
 *
 * @example
 * ```ts
 * crc32c(Buffer.from("123456789")); // 0xe3069283
 * ```
 */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let crc = -1;
  let i = start;
  // The typed-array reads are in bounds by construction; `as number` only quiets the index checks.
  for (const last = end - 8; i <= last; i += 8) {
    const a =
      crc ^
      ((bytes[i] as number) |
        ((bytes[i + 1] as number) << 8) |
        ((bytes[i + 2] as number) << 16) |
        ((bytes[i + 3] as number) << 24));
    crc =
      (T7[a & 0xff] as number) ^
      (T6[(a >>> 8) & 0xff] as number) ^
      (T5[(a >>> 16) & 0xff] as number) ^
      (T4[a >>> 24] as number) ^
      (T3[bytes[i + 4] as number] as number) ^
      (T2[bytes[i + 5] as number] as number) ^
      (T1[bytes[i + 6] as number] as number) ^
      (T0[bytes[i + 7] as number] as number);
  }
  for (; i < end; i++) crc = (T0[(crc ^ (bytes[i] as number)) & 0xff] as number) ^ (crc >>> 8);
  return ~crc >>> 0;
}
