import type { JobStatus } from "./job-status.js";

/**
 * The answer of a health check: `ok`, and why (shown in the probe's JSON body).
 *
 * @example
 * ```ts
 * const verdict: HealthVerdict = { ok: false, reason: "the job is restarting" };
 * ```
 */
export interface HealthVerdict {
  readonly ok: boolean;
  readonly reason: string;
}

/**
 * How long a subtask loop may stay inside one step (a batch, a snapshot, a commit with its
 * retries) before it counts as stuck: a minute, well above a commit's default retries (about 20 s).
 */
export const DEFAULT_MAX_STEP_MS = 60_000;

/**
 * How old the last completed checkpoint may be for the job to count as ready: three checkpoint
 * intervals (two checkpoints in a row may fail or run long), at least a minute (a short interval
 * must not make readiness flap on a slow store).
 *
 * @example
 * ```ts
 * defaultMaxCheckpointAge(1000); // 60_000
 * defaultMaxCheckpointAge(60_000); // 180_000
 * ```
 */
export function defaultMaxCheckpointAge(checkpointInterval: number | undefined): number {
  return Math.max(3 * (checkpointInterval ?? 0), 60_000);
}

/**
 * Liveness (`/healthz`): the process can still make progress. Not live when the job failed, or
 * when a subtask loop has been inside one step for longer than `maxStepMs` (a loop that waits for
 * input is alive however long it waits). Restoring and restarting are live: they make progress.
 *
 * @example
 * ```ts
 * const { ok, reason } = checkLiveness(job.status());
 * ```
 */
export function checkLiveness(
  status: JobStatus,
  options: { readonly now?: number; readonly maxStepMs?: number } = {},
): HealthVerdict {
  const now = options.now ?? Date.now();
  const maxStepMs = options.maxStepMs ?? DEFAULT_MAX_STEP_MS;
  if (status.state === "failed")
    return { ok: false, reason: `the job failed: ${status.failure ?? "unknown"}` };
  for (const subtask of status.subtasks) {
    const busyFor = now - subtask.lastProgressAt;
    if (!subtask.waiting && !subtask.ended && busyFor > maxStepMs) {
      return {
        ok: false,
        reason: `subtask ${subtask.index} has been inside one step for ${Math.round(busyFor / 1000)} s (limit ${Math.round(maxStepMs / 1000)} s): its loop is stuck`,
      };
    }
  }
  return { ok: true, reason: `the job is ${status.state}` };
}

/**
 * Readiness (`/readyz`): restored and running, live, and checkpointing keeps up — the last
 * completed checkpoint (or, before this attempt completed one, the moment it began running) is at
 * most `maxCheckpointAgeMs` old. Counting from the start of running lets a restored job be ready
 * at once instead of one interval later. With checkpointing off, running and live is enough.
 *
 * @example
 * ```ts
 * const { ok, reason } = checkReadiness(job.status(), { maxCheckpointAgeMs: 30_000 });
 * ```
 */
export function checkReadiness(
  status: JobStatus,
  options: { readonly now?: number; readonly maxCheckpointAgeMs?: number; readonly maxStepMs?: number } = {},
): HealthVerdict {
  const now = options.now ?? Date.now();
  if (status.state !== "running") return { ok: false, reason: `the job is ${status.state}, not running` };
  const liveness = checkLiveness(status, {
    now,
    ...(options.maxStepMs === undefined ? {} : { maxStepMs: options.maxStepMs }),
  });
  if (!liveness.ok) return liveness;
  if (status.checkpointInterval === undefined) return { ok: true, reason: "running (checkpointing is off)" };
  const maxAge = options.maxCheckpointAgeMs ?? defaultMaxCheckpointAge(status.checkpointInterval);
  const last = status.lastCompletedCheckpoint;
  const reference = Math.max(last?.completedAt ?? 0, status.runningSince ?? now);
  const age = now - reference;
  if (age > maxAge) {
    const lastText =
      last === undefined
        ? "none completed yet"
        : `last completed: ${last.id} at ${new Date(last.completedAt).toISOString()}`;
    return {
      ok: false,
      reason: `no checkpoint completed for ${Math.round(age / 1000)} s (limit ${Math.round(maxAge / 1000)} s); ${lastText}`,
    };
  }
  return {
    ok: true,
    reason:
      last === undefined
        ? "running; no checkpoint completed yet"
        : `running; last completed checkpoint ${last.id}`,
  };
}
