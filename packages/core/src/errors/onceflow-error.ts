/**
 * Stable error codes. A code never changes meaning once published: match on it, not on messages.
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   if (isOnceflowError(error) && error.code === "TRANSACTION_TIMED_OUT") alertOnDataLoss(error);
 * }
 * ```
 */
export const ErrorCode = {
  /** A setting is missing, out of range or inconsistent with another. The message says what to change. */
  CONFIGURATION: "CONFIGURATION",
  /** A checkpoint could not be taken, stored or completed. */
  CHECKPOINT_FAILED: "CHECKPOINT_FAILED",
  /** A stored checkpoint is unreadable (checksum mismatch, missing file). Never restored silently. */
  CHECKPOINT_CORRUPT: "CHECKPOINT_CORRUPT",
  /** A named checkpoint does not exist in the storage. */
  CHECKPOINT_NOT_FOUND: "CHECKPOINT_NOT_FOUND",
  /** Restoring state or recovering transactions after a restart failed. */
  RECOVERY_FAILED: "RECOVERY_FAILED",
  /** A commit kept failing after every retry; the transaction is still pending, never dropped. */
  COMMIT_FAILED: "COMMIT_FAILED",
  /** Another writer took over the transaction (a newer process fenced this one). */
  TRANSACTION_FENCED: "TRANSACTION_FENCED",
  /** The external system aborted a pre-committed transaction after its timeout: its data is lost. */
  TRANSACTION_TIMED_OUT: "TRANSACTION_TIMED_OUT",
  /** A record could not be deserialized and the policy is `fail`. */
  DESERIALIZATION_FAILED: "DESERIALIZATION_FAILED",
  /** A required external service or binary is not available. */
  SERVICE_UNAVAILABLE: "SERVICE_UNAVAILABLE",
  /** The restart strategy gave up; `cause` is the last failure. */
  JOB_FAILED: "JOB_FAILED",
  /** A user function threw; `cause` is the error it threw. */
  USER_FUNCTION_FAILED: "USER_FUNCTION_FAILED",
  /**
   * A newer process of this job took over this process's scope (its subtasks): this one is a zombie
   * (it was frozen, partitioned away, or replaced while restarting) and stops for good. Never
   * retried by the restart strategy: the newer process carries on from the latest checkpoint.
   */
  SUPERSEDED: "SUPERSEDED",
  /**
   * The external system refuses a record for good (a NOT NULL or CHECK constraint, a value of the
   * wrong type, a record too large): retrying cannot help, so the job stops at once instead of
   * restarting. `details` name the record (its source position or the sink's row) and, where the
   * system says which, the column. Fix the data or the schema, then restart from the checkpoint.
   */
  RECORD_REJECTED: "RECORD_REJECTED",
  /**
   * The restored checkpoint holds state that no operator of the job claims: an operator's `uid` was
   * renamed, or the operator removed. Never retried. `details.operators` names each one and its
   * kinds of state. Give the operator its old `uid` back, or drop the state on purpose with
   * `allowNonRestoredState: true` (`onceflow run --allow-non-restored-state`), Flink's
   * `--allowNonRestoredState`.
   */
  NON_RESTORED_STATE: "NON_RESTORED_STATE",
} as const;

/** One of the {@link ErrorCode} values. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Extra, machine-readable facts about an error (checkpoint id, transaction id, setting name …). */
export type ErrorDetails = Readonly<Record<string, unknown>>;

/**
 * The brand every {@link OnceflowError} carries, registered with `Symbol.for`: the same symbol in
 * every copy of `@onceflow/core` loaded in one process (its ESM and CommonJS builds, or two
 * versions), so errors are recognised whichever copy created them.
 *
 * @example
 * ```ts
 * (error as Record<symbol, unknown>)[ONCEFLOW_ERROR_BRAND] === true; // what isOnceflowError checks
 * ```
 */
export const ONCEFLOW_ERROR_BRAND: unique symbol = Symbol.for("onceflow.error");

/**
 * The base of every error onceflow throws on purpose. It has a stable {@link ErrorCode}, an optional
 * `cause`, and `details` for the facts a handler needs.
 *
 * One process may load two copies of `@onceflow/core` (an app that `require`s it while a dependency
 * `import`s it): every copy's errors carry the {@link ONCEFLOW_ERROR_BRAND}, and
 * `error instanceof OnceflowError` checks that brand, so it holds for an error of either copy.
 * `instanceof` a subclass (`ConfigurationError`, `TransactionError` …) stays the ordinary prototype
 * check, true for that copy's errors only: match on `code` (or {@link isOnceflowError} and `code`)
 * when copies may mix.
 *
 * @example
 * ```ts
 * throw new OnceflowError("CONFIGURATION", "checkpointing.interval must be at least 10 ms", {
 *   details: { setting: "checkpointing.interval" },
 * });
 * ```
 */
export class OnceflowError extends Error {
  /** The stable code to match on. */
  readonly code: ErrorCode;
  /** Machine-readable facts about the failure. */
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: ErrorDetails } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.details = options.details ?? {};
  }

  /**
   * `value instanceof OnceflowError` is true for errors of every copy of `@onceflow/core` in the
   * process (the brand); `instanceof` a subclass is the ordinary prototype check.
   */
  static override [Symbol.hasInstance](
    this: abstract new (
      ...args: never[]
    ) => unknown,
    value: unknown,
  ): boolean {
    // `this` is the class `instanceof` was asked about: OnceflowError itself, or a subclass.
    // biome-ignore lint/complexity/noThisInStatic: the class in question, not OnceflowError
    if (this === OnceflowError) return isOnceflowError(value);
    // biome-ignore lint/complexity/noThisInStatic: a subclass keeps the prototype check
    return Function.prototype[Symbol.hasInstance].call(this, value);
  }
}

Object.defineProperty(OnceflowError.prototype, ONCEFLOW_ERROR_BRAND, { value: true });

/**
 * Whether `value` is an {@link OnceflowError} of any copy of `@onceflow/core` loaded in this process
 * (ESM or CommonJS, any version that has the brand): it checks the {@link ONCEFLOW_ERROR_BRAND}, not
 * the prototype. Narrowed, `code`, `details` and `cause` can be read.
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   if (isOnceflowError(error) && error.code === "JOB_FAILED") console.error(error.cause);
 * }
 * ```
 */
export function isOnceflowError(value: unknown): value is OnceflowError {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as Record<symbol, unknown>)[ONCEFLOW_ERROR_BRAND] === true &&
    typeof (value as { code?: unknown }).code === "string"
  );
}

/**
 * A setting is wrong. Thrown at start, before any data moves, with a message that names the setting
 * and says what to change.
 *
 * @example
 * ```ts
 * throw new ConfigurationError("checkpointing.timeout", "must be greater than 0, got -1");
 * ```
 */
export class ConfigurationError extends OnceflowError {
  /** The dotted name of the offending setting. */
  readonly setting: string;
  constructor(setting: string, problem: string, options: { cause?: unknown } = {}) {
    super("CONFIGURATION", `${setting}: ${problem}`, { ...options, details: { setting } });
    this.setting = setting;
  }
}

/**
 * A checkpoint could not be taken, stored, read or found. `code` tells which.
 *
 * @example
 * ```ts
 * throw new CheckpointError("CHECKPOINT_CORRUPT", "checkpoint 12: checksum mismatch", { checkpointId: 12 });
 * ```
 */
export class CheckpointError extends OnceflowError {
  /** The checkpoint concerned, when there is one. */
  readonly checkpointId: number | undefined;
  constructor(
    code: "CHECKPOINT_FAILED" | "CHECKPOINT_CORRUPT" | "CHECKPOINT_NOT_FOUND" | "SUPERSEDED",
    message: string,
    options: { checkpointId?: number; cause?: unknown } = {},
  ) {
    super(code, message, { cause: options.cause, details: { checkpointId: options.checkpointId } });
    this.checkpointId = options.checkpointId;
  }
}

/**
 * Restoring state or recovering a sink's transactions after a restart failed.
 *
 * @example
 * ```ts
 * throw new RecoveryError("cannot restore operator 'count': state was written by a different serializer", { cause });
 * ```
 */
export class RecoveryError extends OnceflowError {
  constructor(message: string, options: { cause?: unknown; details?: ErrorDetails } = {}) {
    super("RECOVERY_FAILED", message, options);
  }
}

/**
 * A kind of state an operator keeps in a checkpoint: its operator state (`ListState`,
 * `UnionListState`), its keyed state and timers, a source's split positions, or a two-phase-commit
 * sink's transactions.
 *
 * @example
 * ```ts
 * const kind: OperatorStateKind = "keyed state";
 * ```
 */
export type OperatorStateKind = "operator state" | "keyed state" | "source positions" | "sink transactions";

/**
 * State of one operator `uid` in a restored checkpoint that no operator of the job claims.
 *
 * @example
 * ```ts
 * const state: NonRestoredOperatorState = {
 *   uid: "count", kinds: ["keyed state"], subtasks: [0, 1], pendingTransactions: [], openTransactions: 0,
 * };
 * ```
 */
export interface NonRestoredOperatorState {
  /** The uid the state was stored under. */
  readonly uid: string;
  /** What it holds, in a fixed order: operator state, keyed state, source positions, sink transactions. */
  readonly kinds: readonly OperatorStateKind[];
  /** The subtasks of this process whose restored share holds it. */
  readonly subtasks: readonly number[];
  /**
   * A sink's transactions pre-committed under these checkpoint ids: not committed by this job if
   * the state is dropped (those the old run committed before it stopped are already visible).
   */
  readonly pendingTransactions: readonly { readonly checkpointId: number; readonly transaction?: string }[];
  /** A sink's transactions begun after the checkpoint: not aborted by this job if the state is dropped. */
  readonly openTransactions: number;
}

/**
 * The restored checkpoint holds state that no operator of the job claims (code
 * `NON_RESTORED_STATE`): state is matched to operators by `uid`, and an operator was renamed or
 * removed. Nothing is dropped silently: give the operator its old `uid` back, or allow dropping the
 * state with the job option `allowNonRestoredState: true` (`onceflow run
 * --allow-non-restored-state`).
 *
 * @example
 * ```ts
 * try { await job.execute(); } catch (error) {
 *   if (error instanceof NonRestoredStateError) console.error(error.operators.map((state) => state.uid));
 * }
 * ```
 */
export class NonRestoredStateError extends OnceflowError {
  /** The restored checkpoint. */
  readonly checkpointId: number;
  /** Each unclaimed operator state. */
  readonly operators: readonly NonRestoredOperatorState[];
  constructor(
    message: string,
    options: { checkpointId: number; operators: readonly NonRestoredOperatorState[] },
  ) {
    super("NON_RESTORED_STATE", message, {
      details: { checkpointId: options.checkpointId, operators: options.operators },
    });
    this.checkpointId = options.checkpointId;
    this.operators = options.operators;
  }
}

/**
 * A transaction of a two-phase-commit sink could not be finished. `code` says why:
 * `COMMIT_FAILED` (retries exhausted, the transaction is still pending and will be retried after a
 * restart), `TRANSACTION_FENCED` (a newer writer took the transaction over) or
 * `TRANSACTION_TIMED_OUT` (the external system aborted it: its data is lost).
 *
 * @example
 * ```ts
 * throw new TransactionError("TRANSACTION_TIMED_OUT", "the broker aborted the transaction of checkpoint 7", {
 *   checkpointId: 7, transactionId: "orders-0-1",
 * });
 * ```
 */
export class TransactionError extends OnceflowError {
  /** The checkpoint whose transaction failed, when known. */
  readonly checkpointId: number | undefined;
  /** A printable id of the transaction (transactional id, gid, file name …). */
  readonly transactionId: string | undefined;
  constructor(
    code: "COMMIT_FAILED" | "TRANSACTION_FENCED" | "TRANSACTION_TIMED_OUT",
    message: string,
    options: { checkpointId?: number; transactionId?: string; cause?: unknown } = {},
  ) {
    super(code, message, {
      cause: options.cause,
      details: { checkpointId: options.checkpointId, transactionId: options.transactionId },
    });
    this.checkpointId = options.checkpointId;
    this.transactionId = options.transactionId;
  }
}

/**
 * A record could not be deserialized and the source's policy is `fail`. Carries where the record
 * was, so nothing is lost: fix the producer or choose the `skip` or dead-letter policy.
 *
 * @example
 * ```ts
 * throw new DeserializationError("orders partition 3 offset 1200: Unexpected token", { splitId: "orders-3", position: "1200" });
 * ```
 */
export class DeserializationError extends OnceflowError {
  constructor(message: string, options: { cause?: unknown; details?: ErrorDetails } = {}) {
    super("DESERIALIZATION_FAILED", message, options);
  }
}

/**
 * Wraps any non-onceflow error so that callers always get a code, keeping the original as `cause`.
 *
 * @example
 * ```ts
 * const error = asOnceflowError(new Error("boom"), "USER_FUNCTION_FAILED"); // error.cause is the original
 * ```
 */
export function asOnceflowError(error: unknown, code: ErrorCode = "USER_FUNCTION_FAILED"): OnceflowError {
  if (isOnceflowError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new OnceflowError(code, message, { cause: error });
}
