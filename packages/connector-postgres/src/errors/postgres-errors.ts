import { ConfigurationError, OnceflowError } from "@onceflow/core";

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
  /** The server refused the login: wrong password, unknown role, or no `pg_hba.conf` entry. */
  authenticationFailed: "AUTHENTICATION_FAILED",
  /** The database (or schema) named in the connection settings does not exist. */
  databaseNotFound: "DATABASE_NOT_FOUND",
  /** A sink id is not usable (too long, bad characters, or used twice in this process). */
  invalidSinkId: "INVALID_SINK_ID",
  /** The sink id is claimed by another job in the epoch table: two jobs would fence each other's transactions. */
  sinkIdClaimed: "SINK_ID_CLAIMED",
  /** Options that contradict each other or are out of range. */
  invalidOption: "INVALID_OPTION",
  /** No `PostgresSink` ever registered this sink id in the control tables (an admin tool was given a wrong one). */
  unknownSinkId: "UNKNOWN_SINK_ID",
  /**
   * The server cannot stream changes: `wal_level` is not `logical`, or the role lacks the
   * REPLICATION attribute, or no replication slot or WAL sender is free.
   */
  logicalReplicationUnavailable: "LOGICAL_REPLICATION_UNAVAILABLE",
  /**
   * A restored change source's replication slot is gone (dropped, or invalidated by
   * `max_slot_wal_keep_size`): the changes since the checkpoint are no longer on the server.
   */
  replicationSlotLost: "REPLICATION_SLOT_LOST",
  /** A table to capture is missing from the given publication, or has no primary key for the snapshot. */
  publicationMismatch: "PUBLICATION_MISMATCH",
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

/**
 * What {@link PostgresRecordRejectedError} knows about the refused row. Only the facts PostgreSQL
 * gives: the column, constraint and row number are absent when the server does not say.
 *
 * @example
 * ```ts
 * const facts: RejectedRowDetails = { sqlState: "23502", table: '"public"."orders"', column: "total", batchRow: 3, row: { id: 7, total: null } };
 * ```
 */
export type RejectedRowDetails = {
  /** The SQLSTATE, for example `23502` (not null) or `22P02` (invalid text for the column's type). */
  readonly sqlState: string;
  /** The target table, quoted. */
  readonly table: string;
  /** The column PostgreSQL names, when it names one. */
  readonly column?: string;
  /** The constraint PostgreSQL names, when it names one. */
  readonly constraint?: string;
  /** The row's 1-based position in the batch sent (COPY's "line N"), when known. */
  readonly batchRow?: number;
  /**
   * The row's values as the sink sent them, read back from its COPY text (numbers for numeric
   * columns, booleans for boolean ones, `<n bytes>` for bytea, text otherwise; long values
   * shortened), when known.
   */
  readonly row?: Readonly<Record<string, unknown>>;
  /** PostgreSQL's own description of the row (its `DETAIL`), when there is one. */
  readonly serverDetail?: string;
};

/**
 * PostgreSQL refuses a row for good — a NOT NULL, CHECK, foreign-key or exclusion constraint, or a
 * value that is not valid for the column's type (SQLSTATE class 22). Retrying cannot help, so the
 * code is `RECORD_REJECTED`, which the job treats as permanent: it stops at once instead of
 * restarting. `details` (a {@link RejectedRowDetails}) and the message name the row and the column.
 * Fix the data (or the table), then restart: the job resumes from its latest checkpoint.
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   if (error instanceof PostgresRecordRejectedError) console.error(error.details.column, error.details.row);
 * }
 * ```
 */
export class PostgresRecordRejectedError extends OnceflowError {
  declare readonly details: RejectedRowDetails;
  constructor(message: string, details: RejectedRowDetails, options: { cause?: unknown } = {}) {
    super("RECORD_REJECTED", message, { cause: options.cause, details });
  }
}
