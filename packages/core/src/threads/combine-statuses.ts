import type { JobStatus } from "../runtime/job-status.js";

/**
 * The status of a subtask thread that has not posted one yet: `starting`.
 *
 * @example
 * ```ts
 * startingStatus("orders", 1, 1000).state; // "starting"
 * ```
 */
export function startingStatus(jobId: string, subtaskIndex: number, checkpointInterval?: number): JobStatus {
  return {
    jobId,
    state: "starting",
    since: Date.now(),
    attempt: 0,
    restoredCheckpointId: undefined,
    lastCompletedCheckpoint: undefined,
    runningSince: undefined,
    checkpointInterval,
    subtaskIndexes: [subtaskIndex],
    subtasks: [],
    failure: undefined,
  };
}

// Which state the whole shows when its threads differ: the one furthest from `running`.
const PRECEDENCE: Record<JobStatus["state"], number> = {
  failed: 0,
  restarting: 1,
  created: 2,
  starting: 3,
  restoring: 4,
  stopping: 5,
  finished: 6,
  running: 7,
};

/**
 * One status for the subtask threads of a job, so that `checkLiveness` and `checkReadiness` of the
 * combination say what they say of every thread together: live only if every thread is live,
 * ready only if every thread is ready. The state is the one furthest from `running` (`failed`
 * first); the subtask loops are all of them; the last completed checkpoint and the running start
 * are those of the thread whose checkpointing lags most (the oldest of its last checkpoint and its
 * running start), which is the one `/readyz` must judge.
 *
 * @example
 * ```ts
 * const status = combineStatuses([first.status(), second.status()]);
 * checkReadiness(status).ok; // true only when both are ready
 * ```
 */
export function combineStatuses(statuses: readonly JobStatus[]): JobStatus {
  const [first] = statuses;
  if (first === undefined) throw new RangeError("combineStatuses needs at least one status");
  let furthest = first;
  let laggard = first;
  for (const status of statuses) {
    if (PRECEDENCE[status.state] < PRECEDENCE[furthest.state]) furthest = status;
    if (checkpointReference(status) < checkpointReference(laggard)) laggard = status;
  }
  const restored = statuses.map((status) => status.restoredCheckpointId);
  return {
    jobId: first.jobId,
    state: furthest.state,
    since: furthest.since,
    attempt: Math.max(...statuses.map((status) => status.attempt)),
    restoredCheckpointId: restored.includes(undefined) ? undefined : Math.min(...(restored as number[])),
    lastCompletedCheckpoint: laggard.lastCompletedCheckpoint,
    runningSince: laggard.runningSince,
    checkpointInterval: first.checkpointInterval,
    subtaskIndexes: statuses.flatMap((status) => status.subtaskIndexes).sort((a, b) => a - b),
    subtasks: statuses.flatMap((status) => status.subtasks),
    failure: statuses.find((status) => status.failure !== undefined)?.failure,
  };
}

// What checkReadiness measures a thread's checkpoint age from. Without a running start it uses
// "now", the youngest possible: such a thread never lags (its state, not running, says the rest).
function checkpointReference(status: JobStatus): number {
  if (status.runningSince === undefined) return Number.POSITIVE_INFINITY;
  return Math.max(status.lastCompletedCheckpoint?.completedAt ?? 0, status.runningSince);
}
