import { CheckpointError } from "../errors/onceflow-error.js";
import type { CheckpointMetadata } from "./checkpoint-storage.js";

/**
 * The error a storage gives when a newer incarnation of a scope fenced the caller: a store of an
 * older incarnation's checkpoint, or a claim `after` an incarnation that is no longer the newest.
 * Shared by the storages so that every one says the same thing.
 *
 * @example
 * ```ts
 * if (metadata.incarnation < newest) throw supersededError(metadata, newest);
 * ```
 */
export function supersededError(
  at: Pick<CheckpointMetadata, "jobId" | "scope"> & {
    readonly checkpointId?: number;
    readonly incarnation?: number;
  },
  newestIncarnation: number,
  claimedAfter?: number,
): CheckpointError {
  const own = claimedAfter ?? at.incarnation;
  const what =
    at.checkpointId === undefined
      ? `incarnation ${own} of job '${at.jobId}' scope '${at.scope}' cannot restart`
      : `checkpoint ${at.checkpointId} of job '${at.jobId}' scope '${at.scope}' (incarnation ${own}) cannot be stored`;
  return new CheckpointError(
    "SUPERSEDED",
    `${what}: a newer process (incarnation ${newestIncarnation}) took this scope over. This process is a zombie — it was frozen, cut off, or replaced while it restarted — and stops; the newer one carries on from the latest checkpoint. If no other process should be running, look for a second deployment of this job.`,
    { ...(at.checkpointId === undefined ? {} : { checkpointId: at.checkpointId }) },
  );
}
