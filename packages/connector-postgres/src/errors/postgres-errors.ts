import { ConfigurationError } from "@onceflow/core";

/**
 * Finer, stable reasons for a {@link PostgresConfigurationError} (its `code` is always
 * `CONFIGURATION`): match on `reason` to tell the cases apart.
 *
 * @example
 * ```ts
 * if (error instanceof PostgresConfigurationError && error.reason === PostgresErrorReason.preparedTransactionsDisabled) {
 *   console.error("set max_prepared_transactions or use mode 'staging'");
 * }
 * ```
 */
export const PostgresErrorReason = {
  /** The target table does not exist (or is not visible to the connecting role). */
  tableNotFound: "TABLE_NOT_FOUND",
  /** A configured column is not in the table, or a required one is missing from `columns`. */
  columnMismatch: "COLUMN_MISMATCH",
  /** Upsert conflict columns have no matching unique index or constraint. */
  noUniqueConstraint: "NO_UNIQUE_CONSTRAINT",
  /** `mode: 'prepared'` on a server with `max_prepared_transactions = 0`. */
  preparedTransactionsDisabled: "PREPARED_TRANSACTIONS_DISABLED",
  /** The connecting role lacks a privilege the sink or storage needs. */
  permissionDenied: "PERMISSION_DENIED",
  /** A sink id is not usable (too long, bad characters, or used twice in this process). */
  invalidSinkId: "INVALID_SINK_ID",
  /** Options that contradict each other or are out of range. */
  invalidOption: "INVALID_OPTION",
} as const;

/** One of the {@link PostgresErrorReason} values. */
export type PostgresErrorReason = (typeof PostgresErrorReason)[keyof typeof PostgresErrorReason];

/**
 * A `ConfigurationError` (code `CONFIGURATION`) raised by the PostgreSQL connector, with a stable
 * `reason` and a message that says what to change.
 *
 * @example
 * ```ts
 * throw new PostgresConfigurationError("table", PostgresErrorReason.tableNotFound, 'table "public"."orders" does not exist: create it first');
 * ```
 */
export class PostgresConfigurationError extends ConfigurationError {
  /** Which configuration problem this is. */
  readonly reason: PostgresErrorReason;
  constructor(
    setting: string,
    reason: PostgresErrorReason,
    problem: string,
    options: { cause?: unknown } = {},
  ) {
    super(setting, problem, options);
    this.reason = reason;
  }
}
