import { quote, type TableName } from "../sql/identifiers.js";
import { SEQ_COLUMN, type TargetTable } from "./sink-mode.js";

/**
 * The `INSERT … SELECT … ON CONFLICT` that merges rows waiting in `from` (a staging or scratch
 * table with the {@link SEQ_COLUMN} numbering) into the target. `DISTINCT ON` keeps the last row of
 * each key: `ON CONFLICT` may not touch one row twice in a statement (21000).
 *
 * @example
 * ```ts
 * await client.query(upsertStatement(target, stage));
 * ```
 */
export function upsertStatement(target: TargetTable, from: TableName): string {
  const upsert = target.upsert!;
  const columns = target.columns.map(quote).join(", ");
  const keys = upsert.conflictColumns.map(quote).join(", ");
  const action =
    upsert.updateColumns.length === 0
      ? "DO NOTHING"
      : `DO UPDATE SET ${upsert.updateColumns.map((column) => `${quote(column)} = EXCLUDED.${quote(column)}`).join(", ")}`;
  return `INSERT INTO ${target.table.sql} (${columns})
          SELECT DISTINCT ON (${keys}) ${columns} FROM ${from.sql} ORDER BY ${keys}, ${quote(SEQ_COLUMN)} DESC
          ON CONFLICT (${keys}) ${action}`;
}
