/**
 * SQLSTATE codes the connector reacts to. See the PostgreSQL manual, appendix A.
 *
 * @example
 * ```ts
 * if (sqlState(error) === SqlState.undefinedObject) resolveThroughMarker();
 * ```
 */
export const SqlState = {
  /** `COMMIT PREPARED` of a gid that is not (or no longer) prepared. */
  undefinedObject: "42704",
  /** `PREPARE TRANSACTION` with a gid that is already in use. */
  duplicateObject: "42710",
  undefinedTable: "42P01",
  undefinedColumn: "42703",
  duplicateTable: "42P07",
  insufficientPrivilege: "42501",
  uniqueViolation: "23505",
  /** `ON CONFLICT DO UPDATE` touched the same row twice in one statement. */
  cardinalityViolation: "21000",
  /** `max_prepared_transactions` is 0 (or all slots are used). */
  objectNotInPrerequisiteState: "55000",
  lockNotAvailable: "55P03",
  /** A statement after an error inside the transaction. */
  inFailedTransaction: "25P02",
  invalidColumnReference: "42P10",
  serializationFailure: "40001",
  deadlockDetected: "40P01",
  adminShutdown: "57P01",
  crashShutdown: "57P02",
  cannotConnectNow: "57P03",
  notNullViolation: "23502",
  foreignKeyViolation: "23503",
  checkViolation: "23514",
  exclusionViolation: "23P01",
  /** A row or value too large for PostgreSQL (for example an index row). */
  programLimitExceeded: "54000",
  invalidPassword: "28P01",
  invalidAuthorization: "28000",
  invalidCatalogName: "3D000",
  invalidSchemaName: "3F000",
} as const;

/**
 * The SQLSTATE of a driver error, or `undefined` for anything else.
 *
 * @example
 * ```ts
 * sqlState(error) === "42704";
 * ```
 */
export function sqlState(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);

/**
 * Whether an error is worth retrying: a lost or refused connection, a server shutting down or
 * starting, a lock wait that hit `lock_timeout`, a serialization failure or a deadlock.
 *
 * @example
 * ```ts
 * if (isTransient(error)) await sleep(backoff);
 * ```
 */
export function isTransient(error: unknown): boolean {
  const state = sqlState(error);
  if (state !== undefined) {
    return (
      state.startsWith("08") ||
      state === SqlState.lockNotAvailable ||
      state === SqlState.serializationFailure ||
      state === SqlState.deadlockDetected ||
      state === SqlState.adminShutdown ||
      state === SqlState.crashShutdown ||
      state === SqlState.cannotConnectNow
    );
  }
  if (typeof error === "object" && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    const message = (error as { message?: unknown }).message;
    if (
      typeof message === "string" &&
      /Connection terminated|Client has encountered a connection error|not queryable/i.test(message)
    ) {
      return true;
    }
  }
  return false;
}

/**
 * The error's message, for wrapping into a typed error.
 *
 * @example
 * ```ts
 * messageOf(new Error("boom")); // "boom"
 * ```
 */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Whether PostgreSQL refused the data itself, for good: class 22 (a value invalid for its column's
 * type, too long, out of range), NOT NULL, CHECK, foreign-key and exclusion violations, a row too
 * large. Unique violations are not in the list: the sink's own marker uses them to detect replays.
 *
 * @example
 * ```ts
 * if (isRejectedData(error)) throw recordRejected(error);
 * ```
 */
export function isRejectedData(error: unknown): boolean {
  const state = sqlState(error);
  if (state === undefined) return false;
  return (
    state.startsWith("22") ||
    state === SqlState.notNullViolation ||
    state === SqlState.checkViolation ||
    state === SqlState.foreignKeyViolation ||
    state === SqlState.exclusionViolation ||
    state === SqlState.programLimitExceeded
  );
}

/**
 * What may be logged of an error: its name, message, SQLSTATE or system code, and PostgreSQL's
 * DETAIL. Never the error object itself: driver errors can reference the client, which holds the
 * password and the backend's secret key.
 *
 * @example
 * ```ts
 * logger.warn({ error: loggableError(error) }, "an idle PostgreSQL connection failed");
 * ```
 */
export function loggableError(error: unknown): { name: string; message: string; code?: string } {
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    name: error.name,
    message: error.message,
    ...(typeof code === "string" ? { code } : {}),
  };
}

/** A string field of a driver error (`column`, `constraint`, `where`, `detail`, …), if present. */
export function errorField(error: unknown, field: string): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const value = (error as Record<string, unknown>)[field];
  return typeof value === "string" && value.length > 0 ? value : undefined;
}
