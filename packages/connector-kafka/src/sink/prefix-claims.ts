import { ConfigurationError, type RuntimeContext } from "@onceflow/core";
import { KafkaPrefixClaimedError } from "../errors/prefix-claimed-error.js";

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
        `"${prefix}" is already used by another running KafkaSink (${current.name}${current.jobId === context.jobId ? "" : ` of job "${current.jobId}"`}) of subtask ${context.subtaskIndex} in this process${current.jobId === context.jobId ? "" : `, so job "${context.jobId}" cannot use it`}: sinks sharing a prefix fence each other's transactions. Give each sink its own transactionalIdPrefix`,
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

// ---- claims between jobs, kept in Kafka ------------------------------------------------------------
//
// Within a process the map above keeps two sinks apart. Between processes — two jobs deployed with
// the same prefix — the claim lives in Kafka: a transactional id `<prefix>-claim.<jobId>`, initialized
// (InitProducerId) by subtask 0 at every start and never used for a transaction, so the transaction
// coordinator keeps it (state Empty) until `transactional.id.expiration.ms` after the job's last
// start. The sink's start lists its prefix's transactions anyway (lingering-transactions.ts): a claim
// of another job there refuses the start before anything is fenced.

const CLAIM_MARK = "claim.";

/**
 * The transactional id that marks `jobId`'s claim of `prefix` (it never parses as a pooled id).
 *
 * @example
 * ```ts
 * prefixClaimId("orders-out", "orders"); // "orders-out-claim.orders"
 * ```
 */
export function prefixClaimId(prefix: string, jobId: string): string {
  return `${prefix}-${CLAIM_MARK}${jobId}`;
}

/**
 * The jobs whose claim of `prefix` is among `transactionalIds`, sorted.
 *
 * @example
 * ```ts
 * jobsClaimingPrefix("orders-out", ["orders-out-claim.orders", "orders-out-0-3-1"]); // ["orders"]
 * ```
 */
export function jobsClaimingPrefix(prefix: string, transactionalIds: readonly string[]): string[] {
  const mark = `${prefix}-${CLAIM_MARK}`;
  return [...new Set(transactionalIds.filter((id) => id.startsWith(mark)).map((id) => id.slice(mark.length)))]
    .filter((job) => job.length > 0)
    .sort();
}

/**
 * Refuses the start of `jobId`'s sink when another job claimed `prefix`.
 *
 * @throws KafkaPrefixClaimedError naming both jobs.
 * @example
 * ```ts
 * checkPrefixClaims("orders-out", "orders", ["orders"]); // fine: its own claim
 * ```
 */
export function checkPrefixClaims(prefix: string, jobId: string, claimedBy: readonly string[]): void {
  const others = claimedBy.filter((job) => job !== jobId);
  if (others.length > 0) {
    throw new KafkaPrefixClaimedError(prefix, jobId, others, (job) => prefixClaimId(prefix, job));
  }
}
