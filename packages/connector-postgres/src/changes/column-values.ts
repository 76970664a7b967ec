/**
 * Decodes column values from PostgreSQL's text format (what `pgoutput` sends, and what the initial
 * snapshot reads) into JavaScript values, by type OID. Both paths share this module so a row reads
 * the same whether it came from the snapshot or the stream. Both connections run with
 * `TimeZone=UTC`, `DateStyle=ISO` and `extra_float_digits=3`, which the timestamp and float rules
 * below rely on.
 */

/**
 * A decoded column value. `numeric` stays a string (exact), `bigint` is a bigint, timestamps are
 * ISO 8601 strings with microseconds, `bytea` is a Buffer, json/jsonb are parsed, arrays are arrays.
 *
 * @example
 * ```ts
 * const value: ColumnValue = [1, 2, null];
 * ```
 */
export type ColumnValue =
  | string
  | number
  | bigint
  | boolean
  | Buffer
  | null
  | ColumnValue[]
  | { readonly [key: string]: unknown }
  | unknown[];

/** Type OIDs from `pg_type` that have a decoding of their own. */
const Oid = {
  bool: 16,
  bytea: 17,
  int8: 20,
  int2: 21,
  int4: 23,
  oid: 26,
  json: 114,
  float4: 700,
  float8: 701,
  timestamp: 1114,
  timestamptz: 1184,
  numeric: 1700,
  jsonb: 3802,
} as const;

/** Array type OID → element type OID, for the element types with a decoding of their own. */
const ARRAY_ELEMENTS: ReadonlyMap<number, number> = new Map([
  [1000, Oid.bool],
  [1001, Oid.bytea],
  [1005, Oid.int2],
  [1007, Oid.int4],
  [1016, Oid.int8],
  [1028, Oid.oid],
  [199, Oid.json],
  [3807, Oid.jsonb],
  [1021, Oid.float4],
  [1022, Oid.float8],
  [1115, Oid.timestamp],
  [1185, Oid.timestamptz],
  [1231, Oid.numeric],
  // text-like arrays: elements stay strings
  [1009, 25],
  [1014, 1042],
  [1015, 1043],
  [2951, 2950],
  [1182, 1082],
  [1183, 1083],
  [1187, 1186],
]);

function decodeFloat(text: string): number {
  if (text === "NaN") return Number.NaN;
  if (text === "Infinity") return Number.POSITIVE_INFINITY;
  if (text === "-Infinity") return Number.NEGATIVE_INFINITY;
  return Number(text);
}

/** `2024-01-02 03:04:05.123456+00` (UTC, ISO style) → `2024-01-02T03:04:05.123456Z`. */
function decodeTimestamp(text: string, withZone: boolean): string {
  if (text === "infinity" || text === "-infinity" || text.endsWith(" BC")) return text;
  const iso = text.replace(" ", "T");
  if (!withZone) return iso;
  // Under TimeZone=UTC the offset is always +00.
  return iso.endsWith("+00") ? `${iso.slice(0, -3)}Z` : iso;
}

/**
 * Decodes one value in PostgreSQL's text format. Types without a rule of their own (text, uuid,
 * date, interval, enums, domains, ranges …) stay their text form.
 *
 * @example
 * ```ts
 * decodeColumnValue(20, "9007199254740993"); // 9007199254740993n
 * decodeColumnValue(1007, "{1,NULL,3}"); // [1, null, 3]
 * ```
 */
export function decodeColumnValue(typeOid: number, text: string): ColumnValue {
  switch (typeOid) {
    case Oid.bool:
      return text === "t";
    case Oid.int2:
    case Oid.int4:
    case Oid.oid:
      return Number(text);
    case Oid.int8:
      return BigInt(text);
    case Oid.float4:
    case Oid.float8:
      return decodeFloat(text);
    case Oid.numeric:
      return text;
    case Oid.json:
    case Oid.jsonb:
      return JSON.parse(text) as ColumnValue;
    case Oid.bytea:
      return decodeBytea(text);
    case Oid.timestamp:
      return decodeTimestamp(text, false);
    case Oid.timestamptz:
      return decodeTimestamp(text, true);
    default: {
      const element = ARRAY_ELEMENTS.get(typeOid);
      if (element !== undefined) return parseArray(text, (item) => decodeColumnValue(element, item));
      return text;
    }
  }
}

function decodeBytea(text: string): Buffer {
  if (text.startsWith("\\x")) return Buffer.from(text.slice(2), "hex");
  // The old "escape" output (bytea_output = escape): octal escapes and doubled backslashes.
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\\") {
      if (text[i + 1] === "\\") {
        bytes.push(0x5c);
        i += 1;
      } else {
        bytes.push(Number.parseInt(text.slice(i + 1, i + 4), 8));
        i += 3;
      }
    } else {
      bytes.push(text.charCodeAt(i));
    }
  }
  return Buffer.from(bytes);
}

/**
 * Parses an array literal (`{1,2}`, `{{1,2},{3,4}}`, `{"a b",NULL}`), decoding each element with
 * `element`. A leading dimension decoration (`[0:1]={…}`) is skipped.
 *
 * @example
 * ```ts
 * parseArray('{"x,y",NULL}', (s) => s); // ["x,y", null]
 * ```
 */
export function parseArray(text: string, element: (text: string) => ColumnValue): ColumnValue[] {
  let position = text.startsWith("[") ? text.indexOf("=") + 1 : 0;
  const parseLevel = (): ColumnValue[] => {
    if (position >= text.length || text[position] !== "{")
      throw new Error(`malformed array literal: ${text}`);
    position += 1;
    const items: ColumnValue[] = [];
    if (text[position] === "}") {
      position += 1;
      return items;
    }
    for (;;) {
      if (text[position] === "{") {
        items.push(parseLevel());
      } else if (text[position] === '"') {
        position += 1;
        let value = "";
        while (text[position] !== '"') {
          if (text[position] === "\\") position += 1;
          if (position >= text.length) throw new Error(`malformed array literal: ${text}`);
          value += text[position];
          position += 1;
        }
        position += 1;
        items.push(element(value));
      } else {
        let end = position;
        while (end < text.length && text[end] !== "," && text[end] !== "}") end += 1;
        const raw = text.slice(position, end);
        position = end;
        items.push(raw === "NULL" ? null : element(raw));
      }
      if (text[position] === ",") {
        position += 1;
        continue;
      }
      if (text[position] === "}") {
        position += 1;
        return items;
      }
      throw new Error(`malformed array literal: ${text}`);
    }
  };
  return parseLevel();
}
