import { errorField, isRejectedData, messageOf, SqlState, sqlState } from "../sql/pg-errors.js";
import {
  PostgresConfigurationError,
  PostgresErrorReason,
  PostgresRecordRejectedError,
  type RejectedRowDetails,
} from "./postgres-errors.js";

/**
 * The rows of the statement that failed, so a rejection can name the one PostgreSQL points at
 * (COPY says "line N": the N-th row sent by that COPY).
 */
export interface SentRows {
  /** The target table, quoted, as the user knows it (not a staging or scratch table). */
  readonly table: string;
  /** The written columns, in the order of each row's values. */
  readonly columns: readonly string[];
  /**
   * Row N (1-based) of the failed COPY, in `columns` order; absent when the statement was not a
   * COPY. The sink reads it back from the COPY text it sent.
   */
  readonly rowAt?: (line: number) => readonly unknown[] | undefined;
}

/** Longest text kept of one value in an error's `details.row`. */
const VALUE_CHARS = 80;

/**
 * Turns an error that can never succeed on a retry into its typed, permanent form, and returns any
 * other error unchanged:
 *
 * - bad credentials (28P01, 28000), a missing database or schema (3D000, 3F000), a missing
 *   privilege (42501), table (42P01) or column (42703) → {@link PostgresConfigurationError}
 *   (code `CONFIGURATION`), naming what to change;
 * - data PostgreSQL refuses for good (class 22, 23502, 23503, 23514, 23P01, 54000) →
 *   {@link PostgresRecordRejectedError} (code `RECORD_REJECTED`), naming the row and the column.
 *
 * @example
 * ```ts
 * catch (error) { throw asPermanentError(error, "connection", { table: target.sql, columns, rowAt }); }
 * ```
 */
export function asPermanentError(error: unknown, setting: string, sent?: SentRows): unknown {
  return (
    asConfigurationProblem(error, setting) ??
    (sent === undefined ? undefined : asRecordRejected(error, sent)) ??
    error
  );
}

/**
 * A {@link PostgresConfigurationError} for login, database, privilege, table and column errors,
 * else `undefined`.
 *
 * @example
 * ```ts
 * const problem = asConfigurationProblem(error, "connection"); // reason AUTHENTICATION_FAILED for 28P01
 * ```
 */
export function asConfigurationProblem(
  error: unknown,
  setting: string,
): PostgresConfigurationError | undefined {
  const state = sqlState(error);
  const message = messageOf(error);
  switch (state) {
    case SqlState.invalidPassword:
    case SqlState.invalidAuthorization:
      return new PostgresConfigurationError(
        setting,
        PostgresErrorReason.authenticationFailed,
        `PostgreSQL refused the login (${state}: ${message}): fix the user and password in '${setting}', or the server's pg_hba.conf`,
        { cause: error },
      );
    case SqlState.invalidCatalogName:
    case SqlState.invalidSchemaName:
      return new PostgresConfigurationError(
        setting,
        PostgresErrorReason.databaseNotFound,
        `${message} (${state}): create it, or fix the database or schema named in '${setting}'`,
        { cause: error },
      );
    case SqlState.insufficientPrivilege:
      return new PostgresConfigurationError(
        setting,
        PostgresErrorReason.permissionDenied,
        `${message} (${state}): grant the privilege to the connecting role, or connect as another one`,
        { cause: error },
      );
    case SqlState.undefinedTable:
      return new PostgresConfigurationError(
        setting,
        PostgresErrorReason.tableNotFound,
        `${message} (${state}): the table was dropped or renamed while the job ran; create it again, or fix the sink's 'table'`,
        { cause: error },
      );
    case SqlState.undefinedColumn:
      return new PostgresConfigurationError(
        setting,
        PostgresErrorReason.columnMismatch,
        `${message} (${state}): a column was dropped or renamed while the job ran; make the table and the sink's 'columns' match again`,
        { cause: error },
      );
    default:
      return undefined;
  }
}

/**
 * A {@link PostgresRecordRejectedError} for data PostgreSQL refuses for good (see
 * {@link isRejectedData}), else `undefined`. Names the row from COPY's "line N" when the rows sent
 * are known, the column from the error's `column` field or COPY's "column X" context, and keeps
 * PostgreSQL's DETAIL (for example "Failing row contains (…)") for the rest.
 *
 * @example
 * ```ts
 * const rejected = asRecordRejected(error, { table: '"public"."orders"', columns: ["id", "total"], rowAt: (line) => rows[line - 1] });
 * rejected?.details.batchRow; // 3
 * ```
 */
export function asRecordRejected(error: unknown, sent: SentRows): PostgresRecordRejectedError | undefined {
  if (!isRejectedData(error)) return undefined;
  const state = sqlState(error) as string;
  const where = errorField(error, "where");
  const line = where === undefined ? undefined : /\bline (\d+)/.exec(where)?.[1];
  const batchRow = line === undefined ? undefined : Number(line);
  const column =
    errorField(error, "column") ?? (where === undefined ? undefined : /\bcolumn ([^:,]+):/.exec(where)?.[1]);
  const constraint = errorField(error, "constraint");
  const serverDetail = errorField(error, "detail");
  const values = batchRow === undefined ? undefined : sent.rowAt?.(batchRow);
  const row = values === undefined ? undefined : shortenRow(sent.columns, values);
  const details: RejectedRowDetails = {
    sqlState: state,
    table: sent.table,
    ...(column === undefined ? {} : { column }),
    ...(constraint === undefined ? {} : { constraint }),
    ...(batchRow === undefined ? {} : { batchRow }),
    ...(row === undefined ? {} : { row }),
    ...(serverDetail === undefined ? {} : { serverDetail }),
  };
  const which = [
    row === undefined ? undefined : `row ${JSON.stringify(row)}`,
    batchRow === undefined ? undefined : `(row ${batchRow} of its batch)`,
    column === undefined ? undefined : `column "${column}"`,
    constraint === undefined ? undefined : `constraint "${constraint}"`,
    row === undefined && serverDetail !== undefined ? serverDetail : undefined,
  ]
    .filter((part) => part !== undefined)
    .join(", ");
  return new PostgresRecordRejectedError(
    `${sent.table} refuses a record for good (${state}: ${messageOf(error)})${which === "" ? "" : `: ${which}`}. Retrying cannot help, so the job stops: fix the data (or the table — for example ALTER TABLE … DROP NOT NULL), then restart; it resumes from its latest checkpoint`,
    details,
    { cause: error },
  );
}

function shortenRow(columns: readonly string[], values: readonly unknown[]): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  columns.forEach((column, index) => {
    row[column] = shortenValue(values[index]);
  });
  return row;
}

function shortenValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "number" || typeof value === "boolean") return value;
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Uint8Array) return `<${value.length} bytes>`;
  if (value instanceof Date) return value.toISOString();
  let text: string;
  try {
    text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > VALUE_CHARS ? `${text.slice(0, VALUE_CHARS)}…(${text.length} chars)` : text;
}
