import { ConfigurationError } from "@onceflow/core";

/**
 * A KafkaSink's `transactionalIdPrefix` is claimed by another job: the two jobs' sinks would fence
 * each other's transactions (a completed checkpoint's data would fail to commit). Thrown at the
 * sink's start, before it fences or writes anything; code `CONFIGURATION` (the job stops at once).
 * The message names both jobs and what to change.
 *
 * @example
 * ```ts
 * try {
 *   await job.execute();
 * } catch (error) {
 *   if (error instanceof KafkaPrefixClaimedError) console.error(`prefix of ${error.claimedBy.join(", ")}`);
 * }
 * ```
 */
export class KafkaPrefixClaimedError extends ConfigurationError {
  /** The prefix both jobs use. */
  readonly prefix: string;
  /** The job that was refused. */
  readonly jobId: string;
  /** The other jobs that claimed the prefix. */
  readonly claimedBy: readonly string[];
  constructor(prefix: string, jobId: string, claimedBy: readonly string[], claimId: (job: string) => string) {
    const others = claimedBy.map((job) => `"${job}"`).join(", ");
    super(
      "transactionalIdPrefix",
      `"${prefix}" is claimed by job ${others} (transactional id ${claimedBy.map((job) => `"${claimId(job)}"`).join(", ")}), so job "${jobId}" cannot use it: the exactly-once sinks of two jobs that share a prefix fence each other's transactions, and data of completed checkpoints fails to commit. Give this sink its own transactionalIdPrefix. If job ${others} is gone for good and job "${jobId}" takes its place, choose a new prefix all the same, or wait until the broker forgets the claim (transactional.id.expiration.ms after that job's last start, 7 days by default)`,
    );
    this.prefix = prefix;
    this.jobId = jobId;
    this.claimedBy = [...claimedBy];
  }
}
