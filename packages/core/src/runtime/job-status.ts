import type { SubtaskLiveness } from "./subtask.js";

/**
 * Where a job is in its life:
 *
 * | state | meaning |
 * |---|---|
 * | `created` | constructed, `execute()` not called yet |
 * | `starting` | `execute()` began: resolving the checkpoint storage |
 * | `restoring` | an attempt claims its scope, plans the restore and initializes operators (sinks recover their transactions) |
 * | `running` | the subtask loops run and checkpoints are triggered |
 * | `stopping` | a stop (signal or `stop()`) or the end of input: the final checkpoint is taken and committed |
 * | `restarting` | an attempt failed; the next one starts after the restart strategy's delay |
 * | `finished` | `execute()` resolved |
 * | `failed` | `execute()` rejected: a permanent failure, or the restart strategy gave up |
 *
 * @example
 * ```ts
 * if (job.status().state === "running") console.log("up");
 * ```
 */
export type JobState =
  | "created"
  | "starting"
  | "restoring"
  | "running"
  | "stopping"
  | "restarting"
  | "finished"
  | "failed";

/**
 * A subtask loop of this process, as {@link JobStatus} reports it.
 *
 * @example
 * ```ts
 * const busyFor = Date.now() - status.subtasks[0]!.lastProgressAt;
 * ```
 */
export type SubtaskStatus = SubtaskLiveness;

/**
 * A snapshot of a running job, for health checks and dashboards: `job.status()`.
 *
 * @example
 * ```ts
 * const { state, lastCompletedCheckpoint, subtasks } = job.status();
 * ```
 */
export interface JobStatus {
  readonly jobId: string;
  readonly state: JobState;
  /** When the job entered `state` (ms since the epoch). */
  readonly since: number;
  /** The current attempt (0 for the first; each restart adds one). */
  readonly attempt: number;
  /** The checkpoint the current attempt restored, if any. */
  readonly restoredCheckpointId: number | undefined;
  /** The last checkpoint this process completed (stored), and when (ms since the epoch). */
  readonly lastCompletedCheckpoint: { readonly id: number; readonly completedAt: number } | undefined;
  /** When the current attempt began running (ms since the epoch); undefined before it runs. */
  readonly runningSince: number | undefined;
  /** The checkpoint interval in ms, or undefined when checkpointing is off. */
  readonly checkpointInterval: number | undefined;
  /** The subtasks this process runs (all of them, or the one of `subtaskIndex`). */
  readonly subtaskIndexes: readonly number[];
  /** The subtask loops of the current attempt in this process; empty while none runs. */
  readonly subtasks: readonly SubtaskStatus[];
  /** Why the job failed (`failed`) or why the last attempt failed (`restarting`). */
  readonly failure: string | undefined;
}

/**
 * Keeps a job's {@link JobStatus} up to date; the `Job` calls it at each transition.
 *
 * @example
 * ```ts
 * const tracker = new JobStatusTracker("orders", [0, 1], 1000);
 * tracker.enter("starting");
 * tracker.status().state; // "starting"
 * ```
 */
export class JobStatusTracker {
  private state: JobState = "created";
  private since = Date.now();
  private attempt = 0;
  private restoredCheckpointId: number | undefined;
  private lastCompleted: { id: number; completedAt: number } | undefined;
  private runningSince: number | undefined;
  private loops: (() => readonly SubtaskStatus[]) | undefined;
  private failure: string | undefined;
  private stopRequested = false;

  constructor(
    private readonly jobId: string,
    private readonly subtaskIndexes: readonly number[],
    private readonly checkpointInterval: number | undefined,
  ) {}

  /** Moves to `state`; a requested stop keeps the job `stopping` until it finished or failed. */
  enter(state: JobState): void {
    const next = this.stopRequested && (state === "running" || state === "restoring") ? "stopping" : state;
    if (next === this.state) return;
    this.state = next;
    this.since = Date.now();
  }

  /** `execute()` began. */
  started(): void {
    this.stopRequested = false;
    this.attempt = 0;
    this.failure = undefined;
    this.enter("starting");
  }

  /** A stop was requested: the job is `stopping` from now on (if it runs). */
  stopping(): void {
    this.stopRequested = true;
    if (this.state !== "created" && this.state !== "finished" && this.state !== "failed")
      this.enter("stopping");
  }

  /** Attempt `attempt` began restoring. */
  restoring(attempt: number): void {
    this.attempt = attempt;
    this.restoredCheckpointId = undefined;
    this.runningSince = undefined;
    this.enter("restoring");
  }

  /** The attempt's loops run; `loops` tells how each is doing. */
  running(restoredCheckpointId: number | undefined, loops: () => readonly SubtaskStatus[]): void {
    this.restoredCheckpointId = restoredCheckpointId;
    this.loops = loops;
    this.runningSince = Date.now();
    this.enter("running");
  }

  /** A checkpoint was stored. */
  checkpointCompleted(id: number, completedAt: number): void {
    this.lastCompleted = { id, completedAt };
  }

  /** The attempt's loops ended (it finished or failed). */
  attemptEnded(): void {
    this.loops = undefined;
  }

  /** The attempt failed; the next one follows (`restarting`) or the job failed for good. */
  attemptFailed(error: unknown, forGood: boolean): void {
    this.failure = error instanceof Error ? error.message : String(error);
    this.enter(forGood ? "failed" : "restarting");
  }

  /** The current status. */
  status(): JobStatus {
    return {
      jobId: this.jobId,
      state: this.state,
      since: this.since,
      attempt: this.attempt,
      restoredCheckpointId: this.restoredCheckpointId,
      lastCompletedCheckpoint: this.lastCompleted === undefined ? undefined : { ...this.lastCompleted },
      runningSince: this.runningSince,
      checkpointInterval: this.checkpointInterval,
      subtaskIndexes: this.subtaskIndexes,
      subtasks: this.loops?.() ?? [],
      failure: this.failure,
    };
  }
}
