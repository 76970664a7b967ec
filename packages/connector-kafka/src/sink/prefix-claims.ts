import { ConfigurationError, type RuntimeContext } from "@onceflow/core";

/** Who holds a `prefix/subtask` in this process: a sink of one attempt of one job. */
interface PrefixClaim {
  readonly holder: object;
  readonly name: string;
  readonly jobId: string;
  readonly incarnation: number;
  readonly attemptNumber: number;
}

/** `prefix/subtask` of every exactly-once KafkaSink running in this process, and who holds it. */
const claims = new Map<string, PrefixClaim>();

/**
 * Claims `prefix` for one subtask in this process, so that two sinks sharing a prefix (which would
 * fence each other's transactions) are refused. A claim belongs to an attempt: an attempt of the
 * same job that is newer (a higher incarnation, or the same incarnation and a higher attempt
 * number) takes it over, however the older attempt ended — its `close()` may never have run, for
 * example after its `initializeState` failed. Returns the key to release with
 * {@link releasePrefixClaim}.
 *
 * @example
 * ```ts
 * const key = claimPrefix(this, "KafkaSink", "orders-out", context);
 * // ... at close:
 * releasePrefixClaim(this, key);
 * ```
 */
export function claimPrefix(
  holder: object,
  name: string,
  prefix: string,
  context: Pick<RuntimeContext, "jobId" | "subtaskIndex" | "incarnation" | "attemptNumber">,
): { readonly key: string; readonly tookOverFrom: string | undefined } {
  const key = `${prefix}/${context.subtaskIndex}`;
  const current = claims.get(key);
  let tookOverFrom: string | undefined;
  if (current !== undefined && current.holder !== holder) {
    const olderAttemptOfThisJob =
      current.jobId === context.jobId &&
      (current.incarnation < context.incarnation ||
        (current.incarnation === context.incarnation && current.attemptNumber < context.attemptNumber));
    if (!olderAttemptOfThisJob) {
      throw new ConfigurationError(
        "transactionalIdPrefix",
        `"${prefix}" is already used by another running KafkaSink (${current.name}) of subtask ${context.subtaskIndex} in this process: sinks sharing a prefix fence each other's transactions. Give each sink its own transactionalIdPrefix`,
      );
    }
    tookOverFrom = `${current.name} (incarnation ${current.incarnation}, attempt ${current.attemptNumber})`;
  }
  claims.set(key, {
    holder,
    name,
    jobId: context.jobId,
    incarnation: context.incarnation,
    attemptNumber: context.attemptNumber,
  });
  return { key, tookOverFrom };
}

/**
 * Ends `holder`'s claim under `key` (a claim taken over by a newer attempt stays with it).
 *
 * @example
 * ```ts
 * releasePrefixClaim(this, "orders-out/0");
 * ```
 */
export function releasePrefixClaim(holder: object, key: string | undefined): void {
  if (key !== undefined && claims.get(key)?.holder === holder) claims.delete(key);
}
