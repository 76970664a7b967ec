/**
 * A log sequence number (a position in PostgreSQL's write-ahead log) in its text form `16/B374D848`
 * and as a bigint for comparisons. Checkpoints keep the text form: readable, and the same as
 * `pg_replication_slots.confirmed_flush_lsn` shows.
 */

/**
 * Parses `X/Y` (hexadecimal halves) into a bigint.
 *
 * @example
 * ```ts
 * lsnToBigInt("0/16B3748"); // 23803720n
 * ```
 */
export function lsnToBigInt(lsn: string): bigint {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  if (match === null) throw new Error(`not a log sequence number: ${JSON.stringify(lsn)}`);
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/**
 * Formats a bigint as `X/Y`, as PostgreSQL prints it.
 *
 * @example
 * ```ts
 * bigIntToLsn(23803720n); // "0/16B3748"
 * ```
 */
export function bigIntToLsn(value: bigint): string {
  const high = (value >> 32n) & 0xffffffffn;
  const low = value & 0xffffffffn;
  return `${high.toString(16).toUpperCase()}/${low.toString(16).toUpperCase()}`;
}

/** Microseconds from the Unix epoch to PostgreSQL's (2000-01-01T00:00:00Z). */
const POSTGRES_EPOCH_MICROS = 946_684_800_000_000n;

/**
 * A PostgreSQL protocol timestamp (microseconds since 2000-01-01 UTC) as an ISO 8601 string in UTC
 * with all six fractional digits, so no precision is lost.
 *
 * @example
 * ```ts
 * postgresMicrosToIso(0n); // "2000-01-01T00:00:00.000000Z"
 * ```
 */
export function postgresMicrosToIso(micros: bigint): string {
  const unixMicros = micros + POSTGRES_EPOCH_MICROS;
  const millis = unixMicros / 1000n - (unixMicros % 1000n < 0n ? 1n : 0n);
  const restMicros = unixMicros - millis * 1000n;
  const iso = new Date(Number(millis)).toISOString(); // …ss.mmmZ
  return `${iso.slice(0, -1)}${restMicros.toString().padStart(3, "0")}Z`;
}

/**
 * Now, as PostgreSQL protocol microseconds (for standby status updates).
 *
 * @example
 * ```ts
 * const now = nowPostgresMicros();
 * ```
 */
export function nowPostgresMicros(): bigint {
  return BigInt(Date.now()) * 1000n - POSTGRES_EPOCH_MICROS;
}
