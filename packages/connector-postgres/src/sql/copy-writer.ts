import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { PoolClient } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { type ColumnEncoding, copyField } from "./copy-text.js";
import { quote, type TableName } from "./identifiers.js";

/** Rows are sent in chunks of about this many bytes, so COPY streams instead of building one string. */
const CHUNK_BYTES = 256 * 1024;

/**
 * Rows encoded in COPY's text format, in chunks of about 256 KiB, ready for {@link copyText}: the
 * string form of the format. The sink writes rows into a `CopyTextBuffer` instead (the same bytes,
 * encoded as rows arrive); this one stays as the reference its tests compare against.
 *
 * @example
 * ```ts
 * encodeCopyText([[1, "a\tb"]], ["scalar", "scalar"]); // ["1\ta\\tb\n"]
 * ```
 */
export function encodeCopyText(
  rows: Iterable<readonly unknown[]>,
  encodings: readonly ColumnEncoding[],
): string[] {
  const chunks: string[] = [];
  let chunk = "";
  for (const row of rows) {
    // Appended field by field: no string per line, which is most of the garbage at high rates.
    for (let index = 0; index < row.length; index++) {
      chunk += copyField(row[index], encodings[index] ?? "scalar");
      chunk += index === row.length - 1 ? "\n" : "\t";
    }
    if (chunk.length >= CHUNK_BYTES) {
      chunks.push(chunk);
      chunk = "";
    }
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * Streams COPY text — Buffers filled by a `CopyTextBuffer`, or strings made by
 * {@link encodeCopyText} — into a table with `COPY … FROM STDIN` on the given client, inside
 * whatever transaction the client has open. Buffers go to the socket as they are (no copy): they
 * must not change until the returned promise settles.
 *
 * @returns the number of rows PostgreSQL reports as copied.
 * @example
 * ```ts
 * const text = encodeCopyText([[1, 9.5]], ["scalar", "scalar"]);
 * await copyText(client, tableName("public", "orders"), ["id", "total"], text);
 * ```
 */
export async function copyText(
  client: PoolClient,
  table: TableName,
  columns: readonly string[],
  chunks: readonly (string | Uint8Array)[],
): Promise<number> {
  const statement = `COPY ${table.sql} (${columns.map(quote).join(", ")}) FROM STDIN`;
  const stream = client.query(copyFrom(statement));
  await pipeline(Readable.from(chunks), stream);
  return stream.rowCount;
}
