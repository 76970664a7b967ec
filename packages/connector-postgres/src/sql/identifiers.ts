import { createHash } from "node:crypto";

/**
 * A table (or other relation) with its schema, quoted for SQL.
 *
 * @example
 * ```ts
 * const table = tableName("public", "orders");
 * `INSERT INTO ${table.sql} …`; // "public"."orders"
 * ```
 */
export interface TableName {
  readonly schema: string;
  readonly name: string;
  /** `"schema"."name"`, quoted as the driver's escapeIdentifier quotes. */
  readonly sql: string;
}

/**
 * Builds a {@link TableName}, quoting both parts so that any name (quotes, dots, upper case) is safe.
 *
 * @example
 * ```ts
 * tableName("public", 'we"ird').sql; // "public"."we""ird"
 * ```
 */
export function tableName(schema: string, name: string): TableName {
  return { schema, name, sql: `${quote(schema)}.${quote(name)}` };
}

/**
 * Quotes one identifier (column, table or schema name) as pg's `escapeIdentifier` does: in double
 * quotes, each double quote doubled. Written out here (and tested against pg's) so that naming a
 * table does not load the driver (`pg-loader.ts`).
 *
 * @example
 * ```ts
 * quote("order id"); // "order id"
 * ```
 */
export function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/**
 * Quotes a string literal, for the few statements that accept no bind parameters
 * (`PREPARE TRANSACTION`, `COMMIT PREPARED`, `ROLLBACK PREPARED`, `SET`), as pg's `escapeLiteral`
 * does: in single quotes, each single quote and backslash doubled, and an `E` string (with a space
 * before it) when there was a backslash, so that it means the same whatever
 * `standard_conforming_strings` is.
 *
 * @example
 * ```ts
 * `COMMIT PREPARED ${literal(gid)}`;
 * ```
 */
export function literal(value: string): string {
  const escaped = `'${value.replace(/['\\]/g, (character) => character + character)}'`;
  return value.includes("\\") ? ` E${escaped}` : escaped;
}

/**
 * A short, stable hex digest of a name, used to build internal table names that stay under
 * PostgreSQL's 63-byte identifier limit whatever the sink id is.
 *
 * @example
 * ```ts
 * shortHash("orders.out"); // "3f2a9c0d1b7e"
 * ```
 */
export function shortHash(value: string, length = 12): string {
  return createHash("sha256").update(value).digest("hex").slice(0, length);
}
