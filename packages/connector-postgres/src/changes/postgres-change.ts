import type { ColumnValue } from "./column-values.js";

/**
 * A row as column name → decoded value.
 *
 * @example
 * ```ts
 * const row: PostgresRow = { id: 7n, total: "19.90", tags: ["new"] };
 * ```
 */
export type PostgresRow = { readonly [column: string]: ColumnValue };

/**
 * What happened: a row `read` by the initial snapshot, an `insert`, `update` or `delete`, or a
 * `truncate` of the whole table.
 *
 * @example
 * ```ts
 * const kind: PostgresChangeKind = "update";
 * ```
 */
export type PostgresChangeKind = "read" | "insert" | "update" | "delete" | "truncate";

/**
 * One change of a captured table, in commit order — Debezium's change event, typed.
 *
 * - `after` is the new row (read, insert, update); `before` is the old one as far as the table's
 *   `REPLICA IDENTITY` gives it: `beforeImage: "full"` (REPLICA IDENTITY FULL) is the whole old
 *   row; `"key"` (DEFAULT or USING INDEX) holds only the key columns, and for an update only when
 *   the key changed; `"none"` means no old image (inserts, reads, truncates, and updates that kept
 *   their key under DEFAULT).
 * - `unchangedToastColumns` names columns whose large (TOASTed) value the update did not touch:
 *   PostgreSQL does not send them, so they are absent from `after` — never invented.
 * - `commitLsn`, `commitTime` and `xid` name the transaction (for `read`: the snapshot's
 *   consistent point, no time, xid 0). `changeIndex` is the change's place in its transaction.
 *
 * @example
 * ```ts
 * if (change.kind === "update" && change.unchangedToastColumns.includes("document")) {
 *   // keep the stored document: it did not change
 * }
 * ```
 */
export interface PostgresChange {
  readonly kind: PostgresChangeKind;
  readonly schema: string;
  readonly table: string;
  readonly before: PostgresRow | null;
  readonly beforeImage: "full" | "key" | "none";
  readonly after: PostgresRow | null;
  readonly unchangedToastColumns: readonly string[];
  /** The commit's LSN (`16/B374D848`); for `read` records, the snapshot's consistent point. */
  readonly commitLsn: string;
  /** The commit time as ISO 8601 UTC with microseconds; `null` for `read` records. */
  readonly commitTime: string | null;
  /** The transaction id (32 bits, as pgoutput sends it); 0 for `read` records. */
  readonly xid: number;
  /** 0-based position of this change in its transaction (or in the snapshot of its table). */
  readonly changeIndex: number;
  /** For `truncate`: whether it was `CASCADE` / `RESTART IDENTITY`. */
  readonly truncate?: { readonly cascade: boolean; readonly restartIdentity: boolean };
}
