/**
 * Encodes values in PostgreSQL's COPY text format: one line per row, tab between fields, `\N` for
 * NULL, backslash escapes for backslash, tab, newline and carriage return.
 */

/** How one column's values are turned into text: PostgreSQL arrays need array literals. */
export type ColumnEncoding = "scalar" | "array";

const NEEDS_ESCAPE = /[\\\t\n\r]/;

function escapeField(text: string): string {
  if (!NEEDS_ESCAPE.test(text)) return text;
  let out = "";
  for (const char of text) {
    if (char === "\\") out += "\\\\";
    else if (char === "\t") out += "\\t";
    else if (char === "\n") out += "\\n";
    else if (char === "\r") out += "\\r";
    else out += char;
  }
  return out;
}

function isBytes(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array;
}

/**
 * The text PostgreSQL parses for one non-null value, before COPY escaping: numbers in decimal
 * (`NaN`, `±Infinity`), bigints, `t`/`f`, Dates ISO-8601, bytes as bytea hex, arrays as array
 * literals for array columns, anything else JSON.
 *
 * @example
 * ```ts
 * valueText(new Date(0), "scalar"); // "1970-01-01T00:00:00.000Z"
 * ```
 */
export function valueText(value: unknown, encoding: ColumnEncoding): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
      return Number.isFinite(value)
        ? String(value)
        : Number.isNaN(value)
          ? "NaN"
          : value > 0
            ? "Infinity"
            : "-Infinity";
    case "bigint":
      return value.toString();
    case "boolean":
      return value ? "t" : "f";
    default:
      break;
  }
  if (value instanceof Date) return value.toISOString();
  if (isBytes(value))
    return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`;
  if (Array.isArray(value) && encoding === "array") return arrayLiteral(value);
  // Objects and arrays into json/jsonb (or text) columns.
  return JSON.stringify(value, (_key, inner: unknown) =>
    typeof inner === "bigint" ? inner.toString() : inner,
  );
}

function arrayElement(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (Array.isArray(value)) return arrayLiteral(value);
  const text = valueText(value, "scalar");
  return `"${text.replace(/[\\"]/g, (char) => `\\${char}`)}"`;
}

/**
 * A PostgreSQL array literal (`{"a","b",NULL}`), nested arrays included.
 *
 * @example
 * ```ts
 * arrayLiteral(["a", null, 'q"']); // {"a",NULL,"q\""}
 * ```
 */
export function arrayLiteral(values: readonly unknown[]): string {
  return `{${values.map(arrayElement).join(",")}}`;
}

/**
 * One COPY text field for a value: `\N` for `null`/`undefined`, otherwise the escaped text.
 * Buffers become bytea hex, Dates ISO-8601, objects JSON, arrays array literals for array columns.
 *
 * @example
 * ```ts
 * copyField("a\tb", "scalar"); // a\\tb
 * copyField(null, "scalar"); // \\N
 * ```
 */
export function copyField(value: unknown, encoding: ColumnEncoding): string {
  if (value === null || value === undefined) return "\\N";
  return escapeField(valueText(value, encoding));
}
