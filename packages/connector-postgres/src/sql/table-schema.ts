import type { ClientBase } from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import type { ColumnEncoding } from "./copy-text.js";
import type { TableName } from "./identifiers.js";
import { SqlState, sqlState } from "./pg-errors.js";

/** One column of the target table as the catalog describes it. */
export interface ColumnInfo {
  readonly name: string;
  /** `format_type` of the column, such as `character varying(20)` or `integer[]`. */
  readonly type: string;
  readonly encoding: ColumnEncoding;
  readonly notNull: boolean;
  readonly hasDefault: boolean;
  readonly generated: boolean;
}

/** What the sink needs to know about its target table. */
export interface TableSchema {
  readonly table: TableName;
  readonly columns: ReadonlyMap<string, ColumnInfo>;
}

/**
 * Reads the columns of a table from the catalog and checks the role may write to it.
 *
 * @throws PostgresConfigurationError `TABLE_NOT_FOUND` or `PERMISSION_DENIED`.
 * @example
 * ```ts
 * const schema = await readTableSchema(client, tableName("public", "orders"), ["INSERT"]);
 * ```
 */
export async function readTableSchema(
  client: ClientBase,
  table: TableName,
  privileges: readonly ("INSERT" | "UPDATE" | "SELECT")[],
): Promise<TableSchema> {
  const found = await client.query<{ oid: string | null; db: string; role: string }>(
    "SELECT to_regclass($1)::oid::text AS oid, current_database() AS db, current_user AS role",
    [table.sql],
  );
  const row = found.rows[0];
  if (row?.oid == null) {
    throw new PostgresConfigurationError(
      "table",
      PostgresErrorReason.tableNotFound,
      `table ${table.sql} does not exist in database "${row?.db ?? "?"}" (or role "${row?.role ?? "?"}" cannot see it): create it before starting the job, or fix 'schema'/'table'`,
    );
  }
  for (const privilege of privileges) {
    const allowed = await client.query<{ ok: boolean }>("SELECT has_table_privilege($1::oid, $2) AS ok", [
      row.oid,
      privilege,
    ]);
    if (allowed.rows[0]?.ok !== true) {
      throw new PostgresConfigurationError(
        "table",
        PostgresErrorReason.permissionDenied,
        `role "${row.role}" has no ${privilege} privilege on ${table.sql}: GRANT ${privilege} ON ${table.sql} TO ${row.role}`,
      );
    }
  }
  const columns = await client.query<{
    name: string;
    type: string;
    category: string;
    not_null: boolean;
    has_default: boolean;
    generated: boolean;
  }>(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, t.typcategory AS category,
            a.attnotnull AS not_null, (a.atthasdef OR a.attidentity <> '') AS has_default,
            (a.attgenerated <> '') AS generated
       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
      WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY a.attnum`,
    [row.oid],
  );
  const map = new Map<string, ColumnInfo>();
  for (const column of columns.rows) {
    map.set(column.name, {
      name: column.name,
      type: column.type,
      encoding: column.category === "A" ? "array" : "scalar",
      notNull: column.not_null,
      hasDefault: column.has_default,
      generated: column.generated,
    });
  }
  return { table, columns: map };
}

/**
 * Checks that the configured columns exist, are writable, and that no NOT NULL column without a
 * default is left out.
 *
 * @throws PostgresConfigurationError `COLUMN_MISMATCH` naming every difference.
 * @example
 * ```ts
 * checkColumns(schema, ["id", "payload"]);
 * ```
 */
export function checkColumns(
  schema: TableSchema,
  columns: readonly string[],
  setting = "columns",
): ColumnInfo[] {
  const problems: string[] = [];
  const infos: ColumnInfo[] = [];
  for (const name of columns) {
    const info = schema.columns.get(name);
    if (info === undefined) problems.push(`column "${name}" does not exist`);
    else if (info.generated) problems.push(`column "${name}" is generated and cannot be written`);
    else infos.push(info);
  }
  for (const info of schema.columns.values()) {
    if (info.notNull && !info.hasDefault && !info.generated && !columns.includes(info.name)) {
      problems.push(`column "${info.name}" is NOT NULL without a default but is not in '${setting}'`);
    }
  }
  if (problems.length > 0) {
    const existing = [...schema.columns.keys()].map((name) => `"${name}"`).join(", ");
    throw new PostgresConfigurationError(
      setting,
      PostgresErrorReason.columnMismatch,
      `${schema.table.sql}: ${problems.join("; ")} (the table has ${existing}): make '${setting}' match the table`,
    );
  }
  return infos;
}

/**
 * Checks that a unique index or constraint covers exactly the upsert's conflict columns, as
 * `ON CONFLICT (…)` requires.
 *
 * @throws PostgresConfigurationError `NO_UNIQUE_CONSTRAINT`.
 * @example
 * ```ts
 * await checkUniqueIndex(client, schema, ["id"]);
 * ```
 */
export async function checkUniqueIndex(
  client: ClientBase,
  schema: TableSchema,
  conflictColumns: readonly string[],
): Promise<void> {
  const result = await client.query<{ ok: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM pg_index i
        WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
          AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text)
                 FROM unnest(i.indkey::int2[]) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
              = (SELECT array_agg(c ORDER BY c) FROM unnest($2::text[]) c)
     ) AS ok`,
    [schema.table.sql, conflictColumns],
  );
  if (result.rows[0]?.ok !== true) {
    throw new PostgresConfigurationError(
      "operation.conflictColumns",
      PostgresErrorReason.noUniqueConstraint,
      `${schema.table.sql} has no unique index or constraint on exactly (${conflictColumns.join(", ")}): add one (ALTER TABLE … ADD UNIQUE (${conflictColumns.join(", ")})) or change the conflict columns`,
    );
  }
}

/**
 * Turns a permission error from the server into a typed configuration error; returns any other
 * error unchanged.
 *
 * @example
 * ```ts
 * catch (error) { throw asPermissionError(error, "table", "CREATE on schema public"); }
 * ```
 */
export function asPermissionError(error: unknown, setting: string, what: string): unknown {
  if (sqlState(error) === SqlState.insufficientPrivilege) {
    return new PostgresConfigurationError(
      setting,
      PostgresErrorReason.permissionDenied,
      `permission denied (${what}): ${(error as Error).message}; grant the privilege to the sink's role or point '${setting}' elsewhere`,
      { cause: error },
    );
  }
  return error;
}
