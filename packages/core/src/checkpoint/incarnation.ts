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
/**
 * The scope whose incarnations fence a checkpoint's store: its `incarnationScope` (a base checkpoint's
 * writer), else its own scope.
 *
 * @example
 * ```ts
 * fencingScopeOf({ scope: "base", incarnationScope: "all" }); // "all"
 * ```
 */
export function fencingScopeOf(metadata: Pick<CheckpointMetadata, "scope" | "incarnationScope">): string {
  return metadata.incarnationScope ?? metadata.scope;
}

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
    `${what}: it was fenced by incarnation ${newestIncarnation} of this scope — a newer process that took the scope over (this one was frozen, cut off, or replaced while it restarted: it stops, the newer one carries on from the latest checkpoint; if no other process should run, look for a second deployment of this job), or this process itself, after the store did not finish within the checkpoint timeout (the checkpoint is then failed, never restored).`,
    { ...(at.checkpointId === undefined ? {} : { checkpointId: at.checkpointId }) },
  );
}
