import type { Connection, PoolClient } from "pg";
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

/** PostgreSQL starts on a COPY data message only once it has all of it: keep them small. */
const MESSAGE_BYTES = 64 * 1024;
const COPY_DATA = 0x64;
const COPY_DONE = Buffer.from([0x63, 0, 0, 0, 4]);

/**
 * One `COPY … FROM STDIN` as a pg submittable: the statement, every data message and CopyDone are
 * handed to the socket at once, without waiting for the server's CopyInResponse. pg-copy-streams
 * waits for it, then for a `drain` per chunk: each of those needs a turn of the event loop, which a
 * sink encoding its next batch gives only every few milliseconds, so the server sat idle between
 * them. Sending ahead is allowed: a server whose COPY failed ignores the data messages that follow.
 */
class CopyIn {
  private rowCount = 0;
  /** pg may fail a query it never submits (a closed client): then there is nothing to wait for. */
  private submitted = false;
  private written = false;
  private finished = false;
  private settled = false;
  private failure: Error | undefined;

  constructor(
    private readonly text: string,
    private readonly chunks: readonly (string | Uint8Array)[],
    private readonly settle: (error: Error | undefined, rowCount: number) => void,
  ) {}

  submit(connection: Connection): void {
    this.submitted = true;
    const stream = connection.stream;
    // One writev for the statement and all data (the kernel takes what its buffer holds now).
    stream.cork();
    try {
      connection.query(this.text);
      for (const chunk of this.chunks) {
        const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
        for (let start = 0; start < bytes.length; start += MESSAGE_BYTES) {
          const piece = bytes.subarray(start, Math.min(bytes.length, start + MESSAGE_BYTES));
          const header = Buffer.allocUnsafe(5);
          header[0] = COPY_DATA;
          header.writeUInt32BE(piece.length + 4, 1);
          stream.write(header);
          stream.write(piece);
        }
      }
      // The callback runs once everything was written: only then may the caller reuse its buffers.
      stream.write(COPY_DONE, () => {
        this.written = true;
        this.end();
      });
    } finally {
      stream.uncork();
    }
  }

  // Called by pg for the messages of this query.
  handleCopyInResponse(): void {}
  handleCommandComplete(message: { text?: string }): void {
    const match = /^COPY (\d+)/.exec(message.text ?? "");
    if (match !== null) this.rowCount = Number(match[1]);
  }
  handleReadyForQuery(): void {
    this.finished = true;
    this.end();
  }
  handleError(error: Error): void {
    this.failure ??= error;
    this.finished = true;
    this.end();
  }
  // pg's query_timeout hook: it replaces this function with one that clears its timer.
  callback(): void {}

  private end(): void {
    // A failure may arrive before all data was written: settle only when both happened, so no
    // buffer is reused while the socket still holds it (a destroyed socket calls back with an error).
    if (this.settled || !this.finished || (this.submitted && !this.written)) return;
    this.settled = true;
    this.callback();
    this.settle(this.failure, this.rowCount);
  }
}

/**
 * Streams COPY text — Buffers filled by a `CopyTextBuffer`, or strings made by
 * {@link encodeCopyText} — into a table with `COPY … FROM STDIN` on the given client, inside
 * whatever transaction the client has open. The statement and all the data go to the socket in one
 * write, without waiting for the server between them. Buffers go as they are (no copy): they must
 * not change until the returned promise settles.
 *
 * @returns the number of rows PostgreSQL reports as copied.
 * @example
 * ```ts
 * const text = encodeCopyText([[1, 9.5]], ["scalar", "scalar"]);
 * await copyText(client, tableName("public", "orders"), ["id", "total"], text);
 * ```
 */
export function copyText(
  client: PoolClient,
  table: TableName,
  columns: readonly string[],
  chunks: readonly (string | Uint8Array)[],
): Promise<number> {
  const statement = `COPY ${table.sql} (${columns.map(quote).join(", ")}) FROM STDIN`;
  return new Promise((resolve, reject) => {
    client.query(
      new CopyIn(statement, chunks, (error, rowCount) =>
        error === undefined ? resolve(rowCount) : reject(error),
      ),
    );
  });
}
