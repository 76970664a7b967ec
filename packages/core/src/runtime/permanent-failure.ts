import { isOnceflowError, type OnceflowError } from "../errors/onceflow-error.js";

// Failures that a restart cannot fix: fail at once instead of looping.
const PERMANENT_CODES = new Set([
  "CONFIGURATION",
  "TRANSACTION_TIMED_OUT",
  "CHECKPOINT_CORRUPT",
  "CHECKPOINT_NOT_FOUND",
  "RECORD_REJECTED",
  "SUPERSEDED",
  "NON_RESTORED_STATE",
]);

/**
 * The failure a restart cannot fix, if any: the error itself or one in its `cause` chain with a
 * permanent code (a user function may wrap the sink's RECORD_REJECTED, for example).
 *
 * @example
 * ```ts
 * const permanent = permanentFailureIn(error);
 * if (permanent !== undefined) throw permanent; // no restart
 * ```
 */
export function permanentFailureIn(error: unknown): OnceflowError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (isOnceflowError(current) && PERMANENT_CODES.has(current.code)) return current;
    current = current.cause;
  }
  return undefined;
}
