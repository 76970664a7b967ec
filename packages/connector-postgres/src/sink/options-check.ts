import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { shortHash } from "../sql/identifiers.js";
import type { PostgresSinkTableOptions } from "./options.js";
import { SEQ_COLUMN } from "./sink-mode.js";

const SINK_ID = /^[A-Za-z0-9_.:]{1,150}$/;

/**
 * The error for a `PostgresSink` setting that cannot work: one reason (`INVALID_OPTION`) for
 * every option check, naming the setting.
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * throw invalid("batchSize", "must be a whole number of at least 1, got 0");
 * ```
 */
export function invalid(setting: string, problem: string): PostgresConfigurationError {
  return new PostgresConfigurationError(setting, PostgresErrorReason.invalidOption, problem);
}

/**
 * The value of a count setting (batch size, lock timeout, marker retention), checked: a count below
 * one or a fraction would make the sink stall or misbehave, so it fails at construction.
 *
 * @internal Not exported from the package.
 * @throws PostgresConfigurationError `INVALID_OPTION`.
 * @example
 * ```ts
 * positiveInteger("batchSize", options.batchSize ?? 5000); // 5000
 * ```
 */
export function positiveInteger(setting: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw invalid(setting, `must be a whole number of at least 1, got ${value}`);
  return value;
}

/**
 * The default sink id: `<jobId>.<operatorUid>`, with characters other than letters, digits, `_`,
 * `.` and `:` replaced by `_` (plus a short hash of the original when anything was replaced, so two
 * ids that differ only there stay apart).
 *
 * @example
 * ```ts
 * defaultSinkId("orders", "out"); // "orders.out"
 * defaultSinkId("g2-pg", "out"); // "g2_pg.out_d5bc50"
 * ```
 */
export function defaultSinkId(jobId: string, operatorUid: string): string {
  const raw = `${jobId}.${operatorUid}`;
  const safe = raw.replace(/[^A-Za-z0-9_.:]/g, "_");
  const id = safe === raw ? raw : `${safe}_${shortHash(raw, 6)}`;
  return id.length <= 150 ? id : `${id.slice(0, 137)}_${shortHash(raw, 12)}`;
}

/**
 * Checks that a sink id is usable in gids and staging table names (also for the admin functions).
 *
 * @internal Not exported from the package (the sink and the admin functions call it).
 * @throws PostgresConfigurationError `INVALID_SINK_ID`.
 * @example
 * ```ts
 * checkSinkId("orders.out"); // fine; "orders-out" throws
 * ```
 */
export function checkSinkId(sinkId: string): void {
  if (typeof sinkId !== "string" || !SINK_ID.test(sinkId)) {
    throw new PostgresConfigurationError(
      "sinkId",
      PostgresErrorReason.invalidSinkId,
      `${JSON.stringify(sinkId)} is not usable: use 1–150 letters, digits, '_', '.' or ':' (no '-', which separates the subtask and checkpoint in gids, and gids must stay under 200 bytes)`,
    );
  }
}

/**
 * Checks the options of a table write (table, columns, `toRow`, operation) at construction, so a
 * mistake fails before the job starts rather than at the first record or the server.
 *
 * @internal Not exported from the package.
 * @throws PostgresConfigurationError `INVALID_OPTION`.
 * @example
 * ```ts
 * checkTableOptions({ connection, table: "events", columns: ["id", "id"] }); // throws: lists a column twice
 * ```
 */
export function checkTableOptions<IN>(options: PostgresSinkTableOptions<IN>): void {
  if (typeof options.table !== "string" || options.table.length === 0) {
    throw invalid("table", "give the target table's name (or a custom 'write' function)");
  }
  if (!Array.isArray(options.columns) || options.columns.length === 0) {
    throw invalid("columns", "give the columns to write, in the order toRow returns them");
  }
  if (new Set(options.columns).size !== options.columns.length)
    throw invalid("columns", "lists a column twice");
  if (options.columns.includes(SEQ_COLUMN))
    throw invalid("columns", `"${SEQ_COLUMN}" is reserved by the sink`);
  if (options.toRow !== undefined && typeof options.toRow !== "function")
    throw invalid("toRow", "must be a function");
  const operation = options.operation ?? { type: "insert" };
  if (operation.type === "upsert") {
    if (!Array.isArray(operation.conflictColumns) || operation.conflictColumns.length === 0) {
      throw invalid(
        "operation.conflictColumns",
        "an upsert needs the columns of a unique index or constraint",
      );
    }
    for (const column of [...operation.conflictColumns, ...(operation.updateColumns ?? [])]) {
      if (!options.columns.includes(column)) {
        throw invalid("operation", `column "${column}" is not in 'columns' (${options.columns.join(", ")})`);
      }
    }
  } else if (operation.type !== "insert") {
    throw invalid(
      "operation",
      `type must be 'insert' or 'upsert', got ${JSON.stringify((operation as { type: unknown }).type)}`,
    );
  }
}
