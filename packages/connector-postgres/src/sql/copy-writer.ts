import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { PoolClient } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { type ColumnEncoding, copyField } from "./copy-text.js";
import { quote, type TableName } from "./identifiers.js";

/** Rows are sent in chunks of about this many bytes, so COPY streams instead of building one string. */
const CHUNK_BYTES = 256 * 1024;

/**
 * Streams rows into a table with `COPY … FROM STDIN` (text format) on the given client, inside
 * whatever transaction the client has open. Each row is an array of field values in `columns`
 * order.
 *
 * @returns the number of rows PostgreSQL reports as copied.
 * @example
 * ```ts
 * await copyRows(client, tableName("public", "orders"), ["id", "total"], ["scalar", "scalar"], [[1, 9.5]]);
 * ```
 */
export async function copyRows(
  client: PoolClient,
  table: TableName,
  columns: readonly string[],
  encodings: readonly ColumnEncoding[],
  rows: Iterable<readonly unknown[]>,
): Promise<number> {
  const statement = `COPY ${table.sql} (${columns.map(quote).join(", ")}) FROM STDIN`;
  const stream = client.query(copyFrom(statement));
  await pipeline(Readable.from(chunks(rows, encodings)), stream);
  return stream.rowCount;
}

function* chunks(
  rows: Iterable<readonly unknown[]>,
  encodings: readonly ColumnEncoding[],
): Generator<string> {
  let chunk = "";
  for (const row of rows) {
    let line = "";
    for (let index = 0; index < row.length; index++) {
      if (index > 0) line += "\t";
      line += copyField(row[index], encodings[index] ?? "scalar");
    }
    chunk += `${line}\n`;
    if (chunk.length >= CHUNK_BYTES) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk.length > 0) yield chunk;
}
