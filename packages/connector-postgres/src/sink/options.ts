import type { CommitRetryOptions } from "@onceflow/core";
import type { PoolClient } from "pg";
import type { PostgresConnectionOptions } from "../sql/pool.js";

/**
 * How the sink makes its output exactly-once:
 *
 * - `prepared`: one PostgreSQL transaction per checkpoint, `PREPARE TRANSACTION` at the checkpoint
 *   barrier, `COMMIT PREPARED` when the checkpoint completes (needs `max_prepared_transactions > 0`).
 * - `staging`: rows of checkpoint N go to a staging table during the interval; one ordinary
 *   transaction moves them into the target when N completes (works on any PostgreSQL).
 * - `auto` (default): `prepared` when the server allows prepared transactions, else `staging`.
 *
 * @example
 * ```ts
 * const mode: PostgresSinkMode = "auto";
 * ```
 */
export type PostgresSinkMode = "prepared" | "staging" | "auto";

/**
 * Plain `INSERT` (through COPY), or upsert (`INSERT … ON CONFLICT (conflictColumns) DO UPDATE`).
 * Upserts are deduplicated per checkpoint first (the last record of a key wins), since
 * `ON CONFLICT` may not touch one row twice in a statement.
 *
 * @example
 * ```ts
 * const operation: PostgresSinkOperation = { type: "upsert", conflictColumns: ["id"] };
 * ```
 */
export type PostgresSinkOperation =
  | { readonly type: "insert" }
  | {
      readonly type: "upsert";
      /** Columns of a unique index or constraint of the table. */
      readonly conflictColumns: readonly string[];
      /** Columns overwritten on conflict (default: every written column not in `conflictColumns`; none = `DO NOTHING`). */
      readonly updateColumns?: readonly string[];
    };

/**
 * Settings shared by both ways of describing what to write.
 *
 * @example
 * ```ts
 * const common: PostgresSinkCommonOptions = { connection: process.env.DATABASE_URL, mode: "auto", batchSize: 5000 };
 * ```
 */
export interface PostgresSinkCommonOptions extends PostgresConnectionOptions {
  /** Shown in logs and errors (default `PostgresSink`). */
  readonly name?: string;
  /** See {@link PostgresSinkMode} (default `auto`). */
  readonly mode?: PostgresSinkMode;
  /** Rows sent to PostgreSQL at once; the sink never holds more than this many in memory (default 5000). */
  readonly batchSize?: number;
  /**
   * Identifies this sink across restarts: in gids (`<sinkId>-<subtask>-<checkpoint>`), markers and
   * staging table names. Letters, digits, `_`, `.` and `:` (no `-`), at most 150 bytes. Default:
   * `<jobId>.<operator uid>` with other characters replaced. Two sinks must never share one.
   */
  readonly sinkId?: string;
  /** Schema of the marker and epoch tables (default: the target table's schema, or `public`). */
  readonly controlSchema?: string;
  /** Marker table name (default `onceflow_sink_markers`). */
  readonly markerTable?: string;
  /** Epoch table name (default `onceflow_sink_epochs`). */
  readonly epochTable?: string;
  /** `lock_timeout` in ms for commits and writes, so a lock held by a stuck prepared transaction fails instead of hanging (default 10 000). */
  readonly lockTimeout?: number;
  /** Markers kept per subtask, counted in checkpoints (default 100). */
  readonly markerRetention?: number;
  /** Retries of `COMMIT PREPARED` / the staging move (core's defaults: 5 attempts, 100 ms doubling to 10 s). */
  readonly commitRetry?: CommitRetryOptions;
  /**
   * Commit each checkpoint in the background while records keep flowing (core's
   * `backgroundCommits`). Default: `true` in staging mode (also when `auto` picks it), whose commit
   * rewrites the checkpoint's rows into the target; `false` in prepared mode, whose
   * `COMMIT PREPARED` is quick. Exactly-once is the same either way; in the background a commit
   * that fails for good fails the job at the sink's next call instead of in the notification.
   */
  readonly backgroundCommits?: boolean;
}

/**
 * Write records into one table, through COPY (insert) or an ON CONFLICT upsert.
 *
 * @example
 * ```ts
 * const options: PostgresSinkTableOptions<Order> = {
 *   connection: process.env.DATABASE_URL, table: "orders", columns: ["id", "total"],
 *   toRow: (order) => [order.id, order.total],
 * };
 * ```
 */
export interface PostgresSinkTableOptions<IN> extends PostgresSinkCommonOptions {
  /** The target table; it must exist. */
  readonly table: string;
  /** Its schema (default `public`). */
  readonly schema?: string;
  /** The columns written, in the order `toRow` returns values when it returns an array. */
  readonly columns: readonly string[];
  /**
   * Turns a record into a row: an array in `columns` order (fastest), or an object keyed by column
   * name. Default: the record itself, which must then be such an object or array.
   */
  readonly toRow?: (value: IN) => readonly unknown[] | Readonly<Record<string, unknown>>;
  /** Insert (default) or upsert. */
  readonly operation?: PostgresSinkOperation;
  readonly write?: undefined;
}

/**
 * Write records with your own SQL, inside the sink's transaction. Only in `prepared` mode: the
 * staging mode has to know the table to move rows into.
 *
 * @example
 * ```ts
 * const options: PostgresSinkCustomWriteOptions<Order> = {
 *   connection: process.env.DATABASE_URL, mode: "prepared",
 *   write: async (client, orders) => {
 *     await client.query("INSERT INTO orders (id) SELECT * FROM unnest($1::bigint[])", [orders.map((o) => o.id)]);
 *   },
 * };
 * ```
 */
export interface PostgresSinkCustomWriteOptions<IN> extends PostgresSinkCommonOptions {
  /** Writes one batch with the client of the open transaction. Do not commit, roll back or use temporary tables. */
  readonly write: (client: PoolClient, rows: readonly IN[]) => Promise<void>;
  readonly table?: undefined;
}

/**
 * Settings of {@link PostgresSink}: connection, what to write ({@link PostgresSinkTableOptions} or
 * {@link PostgresSinkCustomWriteOptions}) and how ({@link PostgresSinkCommonOptions}).
 *
 * @example
 * ```ts
 * const options: PostgresSinkOptions<{ id: number; payload: string }> = {
 *   connection: "postgresql://postgres@localhost/app", table: "events", columns: ["id", "payload"],
 * };
 * ```
 */
export type PostgresSinkOptions<IN> = PostgresSinkTableOptions<IN> | PostgresSinkCustomWriteOptions<IN>;
