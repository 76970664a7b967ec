/**
 * Reads the initial snapshot of the captured tables in primary key order, in pages, inside one
 * REPEATABLE READ transaction: the slot's exported snapshot on a first start (so the stream that
 * follows starts exactly where the snapshot ends), or a new snapshot when an interrupted initial
 * snapshot is resumed after a restore (its transaction snapshot is then recorded, see
 * {@link ResumedSegment}).
 */
import type pg from "pg";
import { quote } from "../sql/identifiers.js";
import { pgDriver } from "../sql/pg-loader.js";
import type { SnapshotTableProgress, TransactionSnapshot } from "./changes-split.js";
import { decodeColumnValue } from "./column-values.js";
import type { PostgresChange, PostgresRow } from "./postgres-change.js";
import type { Queryable } from "./replication-setup.js";
import { TEXT_FORMAT_OPTIONS } from "./replication-stream.js";

/** `schema.table` (or `table`, meaning `public.table`) → its parts. */
export function splitTableName(table: string): { schema: string; name: string } {
  const dot = table.indexOf(".");
  return dot < 0
    ? { schema: "public", name: table }
    : { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

/** The primary key columns of a table and their SQL types, in key order. */
export async function primaryKeyOf(
  client: Queryable,
  table: string,
): Promise<{ columns: string[]; types: string[] }> {
  const { schema, name } = splitTableName(table);
  const result = await client.query<{ column_name: string; column_type: string }>(
    `select a.attname as column_name, format_type(a.atttypid, a.atttypmod) as column_type
       from pg_index i
       join pg_class c on c.oid = i.indrelid
       join pg_namespace n on n.oid = c.relnamespace
       join lateral unnest(i.indkey) with ordinality as k(attnum, ord) on true
       join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum
      where i.indisprimary and n.nspname = $1 and c.relname = $2
      order by k.ord`,
    [schema, name],
  );
  return { columns: result.rows.map((r) => r.column_name), types: result.rows.map((r) => r.column_type) };
}

/** Every value as its text form: the snapshot decodes them like the stream does. */
const RAW_TEXT_TYPES = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;

/**
 * A snapshot being read.
 *
 * @example
 * ```ts
 * const cursor = await SnapshotCursor.open(config, "00000003-00000002-1", progress, "0/16B3748");
 * for (let batch = await cursor.next(500); batch; batch = await cursor.next(500)) emit(batch);
 * ```
 */
export class SnapshotCursor {
  private keys = new Map<string, { columns: string[]; types: string[] }>();

  private constructor(
    private readonly client: pg.Client,
    readonly progress: SnapshotTableProgress[],
    private readonly consistentPoint: string,
    /** The transaction snapshot of a resumed read; undefined when reading the exported one. */
    readonly resumedSnapshot: TransactionSnapshot | undefined,
  ) {}

  /**
   * Opens the snapshot transaction: the exported snapshot `snapshotName`, or (undefined) a new one,
   * in which case every table not done yet gets a {@link ResumedSegment}.
   */
  static async open(
    config: pg.ClientConfig,
    snapshotName: string | undefined,
    progress: readonly SnapshotTableProgress[],
    consistentPoint: string,
  ): Promise<SnapshotCursor> {
    const Client = pgDriver().Client;
    const client = new Client({
      ...config,
      types: RAW_TEXT_TYPES,
      options: [config.options, TEXT_FORMAT_OPTIONS].filter(Boolean).join(" "),
    });
    client.on("error", () => undefined); // a failing query reports it
    await client.connect();
    try {
      await client.query("begin isolation level repeatable read read only");
      let resumed: TransactionSnapshot | undefined;
      let tables = [...progress];
      if (snapshotName !== undefined) {
        await client.query(`set transaction snapshot '${snapshotName.replace(/'/g, "''")}'`);
      } else {
        const row = (
          await client.query<{ snapshot: string; lsn: string }>(
            "select pg_current_snapshot()::text as snapshot, pg_current_wal_lsn()::text as lsn",
          )
        ).rows[0];
        resumed = parseSnapshot(row?.snapshot ?? "");
        const snapshot = resumed;
        const takenAtLsn = row?.lsn ?? "0/0";
        tables = tables.map((table) =>
          table.done
            ? table
            : { ...table, segments: [...table.segments, { afterKey: table.lastKey, snapshot, takenAtLsn }] },
        );
      }
      return new SnapshotCursor(client, tables, consistentPoint, resumed);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
  }

  /** True when every table was read to its end. */
  get done(): boolean {
    return this.progress.every((table) => table.done);
  }

  /** The next page (at most `limit` rows) of the first table not done, as `read` records; undefined when done. */
  async next(limit: number): Promise<PostgresChange[] | undefined> {
    const index = this.progress.findIndex((table) => !table.done);
    const table = this.progress[index];
    if (table === undefined) return undefined;
    let key = this.keys.get(table.table);
    if (key === undefined) {
      key = await primaryKeyOf(this.client, table.table);
      this.keys.set(table.table, key);
    }
    const { schema, name } = splitTableName(table.table);
    const keyList = key.columns.map(quote).join(", ");
    const after =
      table.lastKey === null
        ? ""
        : `where (${keyList}) > (${key.types.map((type, i) => `$${i + 1}::${type}`).join(", ")})`;
    const keyText = key.columns.map((column) => `${quote(column)}::text`).join(", ");
    const result = await this.client.query({
      text: `select *, array[${keyText}] as "__onceflow_key" from ${quote(schema)}.${quote(name)} ${after} order by ${keyList} limit ${limit}`,
      values: table.lastKey === null ? [] : [...table.lastKey],
      rowMode: "array",
    });
    const fields = result.fields.slice(0, -1);
    const records: PostgresChange[] = [];
    let lastKey = table.lastKey;
    for (const values of result.rows as (string | null)[][]) {
      const row: Record<string, PostgresRow[string]> = {};
      fields.forEach((field, i) => {
        const text = values[i];
        row[field.name] =
          text === null || text === undefined ? null : decodeColumnValue(field.dataTypeID, text);
      });
      lastKey = decodeTextArray(values[values.length - 1] ?? "{}");
      records.push({
        kind: "read",
        schema,
        table: name,
        before: null,
        beforeImage: "none",
        after: row,
        unchangedToastColumns: [],
        commitLsn: this.consistentPoint,
        commitTime: null,
        xid: 0,
        changeIndex: table.rowsRead + records.length,
      });
    }
    this.progress[index] = {
      ...table,
      done: result.rows.length < limit,
      lastKey,
      rowsRead: table.rowsRead + records.length,
    };
    return records;
  }

  /** Ends the snapshot transaction and its connection; never throws. */
  async close(): Promise<void> {
    await this.client.query("commit").catch(() => undefined);
    await this.client.end().catch(() => undefined);
  }
}

/** The text[] literal of the key, as strings (a text array's elements never decode further). */
function decodeTextArray(text: string): string[] {
  return decodeColumnValue(1009, text) as string[];
}

/** `xmin:xmax:xip,…` (64-bit ids) → 32-bit ids as pgoutput sends them. */
export function parseSnapshot(text: string): TransactionSnapshot {
  const [xmin = "0", xmax = "0", list = ""] = text.split(":");
  const to32 = (value: string) => Number(BigInt(value) & 0xffffffffn);
  return {
    xmin: to32(xmin),
    xmax: to32(xmax),
    inProgress: list === "" ? [] : list.split(",").map(to32),
  };
}
