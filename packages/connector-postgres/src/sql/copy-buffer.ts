import { type ColumnEncoding, valueText } from "./copy-text.js";

/** The characters COPY text escapes (backslash, tab, newline, carriage return); one native scan. */
const NEEDS_ESCAPE = /[\\\t\n\r]/;
const ESCAPES = /[\\\t\n\r]/g;
const BACKSLASH = 0x5c;
const TAB = 0x09;
const NEWLINE = 0x0a;
const MINUS = 0x2d;
const ZERO = 0x30;

function escapeOf(char: string): string {
  return char === "\\" ? "\\\\" : char === "\t" ? "\\t" : char === "\n" ? "\\n" : "\\r";
}

/** Starting size of a buffer; it doubles as rows need (a batch of 5000 100-byte rows grows it to 1 MiB once). */
const INITIAL_BYTES = 64 * 1024;

/**
 * How a value read back from COPY text is shown in a rejection (see {@link CopyTextBuffer.rowAt}):
 * as a number for numeric columns, a boolean for boolean ones, `<n bytes>` for bytea, text otherwise.
 */
export type ColumnDisplay = "number" | "boolean" | "bytes" | "text";

/**
 * The {@link ColumnDisplay} of a column from its `format_type`.
 *
 * @example
 * ```ts
 * columnDisplay("bigint"); // "number"
 * columnDisplay("integer[]"); // "text"
 * ```
 */
export function columnDisplay(type: string): ColumnDisplay {
  if (type.endsWith("]")) return "text";
  if (/^(smallint|integer|bigint|real|double precision|numeric|decimal)\b/.test(type)) return "number";
  if (type === "boolean") return "boolean";
  if (type === "bytea") return "bytes";
  return "text";
}

/**
 * Rows encoded in PostgreSQL's COPY text format straight into one growing Buffer, as they arrive:
 * what a batch holds between `invoke` and its COPY is bytes, not row objects. The same bytes as
 * `encodeCopyText` and `copyField` (one line per row, tab between fields, `\N` for NULL, backslash escapes
 * for backslash, tab, newline and carriage return; NUL is passed on as is, and PostgreSQL refuses
 * it). Strings without a character to escape — nearly all — are written without a copy; integers
 * digit by digit. {@link reset} empties it for reuse (the memory is kept).
 *
 * @example
 * ```ts
 * const copy = new CopyTextBuffer();
 * copy.appendRow([1, "a\tb", null], ["scalar", "scalar", "scalar"]);
 * copy.bytes().toString(); // "1\ta\\tb\t\\N\n"
 * ```
 */
export class CopyTextBuffer {
  private buffer: Buffer;
  private used = 0;
  private count = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    this.buffer = Buffer.allocUnsafe(Math.max(16, initialBytes));
  }

  /** Rows appended since the last {@link reset}. */
  get rows(): number {
    return this.count;
  }

  /** Bytes appended since the last {@link reset}. */
  get byteLength(): number {
    return this.used;
  }

  /** Bytes this buffer holds, used or not. */
  get capacity(): number {
    return this.buffer.length;
  }

  /**
   * Appends one row. With `seq`, a first field holding that number (the upsert order column).
   * A value that cannot be encoded (a throwing `toJSON`) leaves the buffer as it was.
   */
  appendRow(row: readonly unknown[], encodings: readonly ColumnEncoding[], seq?: number): void {
    const start = this.used;
    try {
      if (seq !== undefined) {
        this.writeNumber(seq);
        this.byte(TAB);
      }
      const last = row.length - 1;
      for (let index = 0; index <= last; index++) {
        this.writeValue(row[index], encodings[index] ?? "scalar");
        this.byte(index === last ? NEWLINE : TAB);
      }
    } catch (error) {
      this.used = start;
      throw error;
    }
    this.count++;
  }

  /** The encoded rows: a view of the buffer, valid until the next {@link reset} or append. */
  bytes(): Buffer {
    return this.buffer.subarray(0, this.used);
  }

  /** Empties the buffer for reuse, keeping its memory. */
  reset(): void {
    this.used = 0;
    this.count = 0;
  }

  /**
   * Row `line` (1-based, COPY's "line N") read back from the bytes, for naming a row PostgreSQL
   * refused: `null` for NULL, otherwise as `displays` says (text when no display is given).
   * `skip` leading fields are left out (the upsert order column).
   */
  rowAt(line: number, displays: readonly ColumnDisplay[], skip = 0): unknown[] | undefined {
    if (!Number.isSafeInteger(line) || line < 1 || line > this.count) return undefined;
    const bytes = this.bytes();
    let start = 0;
    for (let seen = 1; seen < line; seen++) start = bytes.indexOf(NEWLINE, start) + 1;
    const end = bytes.indexOf(NEWLINE, start);
    const fields = bytes
      .toString("utf8", start, end < 0 ? bytes.length : end)
      .split("\t")
      .slice(skip);
    return fields.map((field, index) => readField(field, displays[index] ?? "text"));
  }

  private writeValue(value: unknown, encoding: ColumnEncoding): void {
    switch (typeof value) {
      case "string":
        this.writeText(value);
        return;
      case "number":
        if (Number.isSafeInteger(value)) this.writeNumber(value);
        else this.writeText(valueText(value, encoding));
        return;
      case "boolean":
        this.byte(value ? 0x74 : 0x66);
        return;
      case "undefined":
        this.byte(BACKSLASH);
        this.byte(0x4e);
        return;
      default:
        if (value === null) {
          this.byte(BACKSLASH);
          this.byte(0x4e);
        } else this.writeText(valueText(value, encoding));
    }
  }

  /** A string, escaped only when it holds a character COPY needs escaped. */
  private writeText(value: string): void {
    const text = NEEDS_ESCAPE.test(value) ? value.replace(ESCAPES, escapeOf) : value;
    // At most 3 UTF-8 bytes per UTF-16 unit; counted exactly only when that bound does not fit.
    if (text.length * 3 > this.buffer.length - this.used) this.reserve(Buffer.byteLength(text, "utf8"));
    this.used += this.buffer.write(text, this.used, "utf8");
  }

  /** A safe integer in decimal, digit by digit (no string). */
  private writeNumber(value: number): void {
    this.reserve(17);
    const buffer = this.buffer;
    let at = this.used;
    let rest = value;
    if (rest < 0) {
      buffer[at++] = MINUS;
      rest = -rest;
    }
    let digits = 1;
    for (let scan = rest; scan >= 10; scan = Math.floor(scan / 10)) digits++;
    const end = at + digits;
    let write = end;
    while (rest >= 10) {
      const next = Math.floor(rest / 10);
      buffer[--write] = ZERO + (rest - next * 10);
      rest = next;
    }
    buffer[--write] = ZERO + rest;
    this.used = end;
  }

  private byte(value: number): void {
    if (this.used === this.buffer.length) this.reserve(1);
    this.buffer[this.used++] = value;
  }

  /** Makes room for `bytes` more, doubling the buffer (its used part copied over). */
  private reserve(bytes: number): void {
    const needed = this.used + bytes;
    if (needed <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buffer.copy(grown, 0, 0, this.used);
    this.buffer = grown;
  }
}

/** One field of COPY text back to a value: `\N` is null, escapes undone, shown as `display` says. */
function readField(field: string, display: ColumnDisplay): unknown {
  if (field === "\\N") return null;
  const text = field.includes("\\")
    ? field.replace(/\\(.)/g, (_match, char: string) =>
        char === "t" ? "\t" : char === "n" ? "\n" : char === "r" ? "\r" : char,
      )
    : field;
  switch (display) {
    case "number": {
      const number = Number(text);
      return text.trim() !== "" && Number.isFinite(number) && Number.isSafeInteger(Math.trunc(number))
        ? number
        : text;
    }
    case "boolean":
      return text === "t" ? true : text === "f" ? false : text;
    case "bytes":
      return text.startsWith("\\x") ? `<${(text.length - 2) / 2} bytes>` : text;
    default:
      return text;
  }
}

/** About the largest COPY data message sent, so a huge batch never becomes one message. */
const MESSAGE_BYTES = 1024 * 1024;

/**
 * The bytes of a {@link CopyTextBuffer} as views (no copy) of whole rows, about 1 MiB each (a
 * longer row alone), for `copyText`.
 *
 * @example
 * ```ts
 * await copyText(client, table, columns, copyChunks(copy));
 * ```
 */
export function copyChunks(copy: CopyTextBuffer, messageBytes = MESSAGE_BYTES): Buffer[] {
  const bytes = copy.bytes();
  const chunks: Buffer[] = [];
  let start = 0;
  while (bytes.length - start > messageBytes) {
    let end = bytes.lastIndexOf(NEWLINE, start + messageBytes - 1) + 1;
    if (end <= start) end = bytes.indexOf(NEWLINE, start) + 1 || bytes.length;
    chunks.push(bytes.subarray(start, end));
    start = end;
  }
  if (start < bytes.length) chunks.push(bytes.subarray(start));
  return chunks;
}
