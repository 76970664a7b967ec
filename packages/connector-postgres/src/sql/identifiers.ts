import { createHash } from "node:crypto";
import pg from "pg";

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
  /** `"schema"."name"`, quoted with the driver's escapeIdentifier. */
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
 * Quotes one identifier (column, table or schema name) with the driver's escapeIdentifier.
 *
 * @example
 * ```ts
 * quote("order id"); // "order id"
 * ```
 */
export function quote(identifier: string): string {
  return pg.escapeIdentifier(identifier);
}

/**
 * Quotes a string literal, for the few statements that accept no bind parameters
 * (`PREPARE TRANSACTION`, `COMMIT PREPARED`, `ROLLBACK PREPARED`, `SET`).
 *
 * @example
 * ```ts
 * `COMMIT PREPARED ${literal(gid)}`;
 * ```
 */
export function literal(value: string): string {
  return pg.escapeLiteral(value);
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
