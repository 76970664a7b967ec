import type { JobStatus } from "../runtime/job-status.js";
import type { RestoreSetting } from "../runtime/restore/restore-plan.js";

/**
 * What the main thread hands to each subtask thread (`workerData`): which module to import, which
 * export builds the job, and which subtask to run.
 *
 * @example
 * ```ts
 * const data: SubtaskThreadData = { moduleUrl: "file:///app/job.js", exportName: "createJob", subtaskIndex: 1, metrics: true, statusIntervalMs: 500, allowNonRestoredState: false };
 * ```
 */
export interface SubtaskThreadData {
  readonly moduleUrl: string;
  /** The export that builds the job from `JobLaunchOptions` (`createJob` unless named). */
  readonly exportName: string;
  readonly subtaskIndex: number;
  /** Where the job starts, when the launcher says (`--restore`). */
  readonly restore?: RestoreSetting;
  /** Report metrics into a prom-client registry of the thread, which the main thread aggregates. */
  readonly metrics: boolean;
  /** How often the thread posts its job's status. */
  readonly statusIntervalMs: number;
  /** Hand `allowNonRestoredState: true` to `createJob(launch)`. */
  readonly allowNonRestoredState: boolean;
  /**
   * The main thread's job coordinates this subtask (a `keyBy` exchange between the threads): the
   * thread builds its job and serves the main thread's calls (`HostedCall`) instead of executing it.
   */
  readonly hosted?: boolean;
}

/**
 * Messages from the main thread to a subtask thread: stop with a final checkpoint, or send the
 * metrics registry as JSON (`registry.getMetricsAsJSON()`), answering with the same `id`.
 *
 * @example
 * ```ts
 * worker.postMessage({ type: "stop" } satisfies ToSubtaskThread);
 * ```
 */
export type ToSubtaskThread = { readonly type: "stop" } | { readonly type: "metrics"; readonly id: number };

/**
 * How a subtask's job ended, as its thread posts it: the job's result, or its error's code and
 * message (an error object does not cross threads with its code).
 *
 * @example
 * ```ts
 * const ended: SubtaskEnding = { type: "failed", code: "CONFIGURATION", message: "…" };
 * ```
 */
export type SubtaskEnding =
  | { readonly type: "finished"; readonly result: Readonly<Record<string, unknown>> }
  | { readonly type: "failed"; readonly code: string; readonly message: string };

/**
 * Messages from a subtask thread to the main thread: its job's status (posted every
 * `statusIntervalMs` and at the end), metrics on request, and how its job ended.
 *
 * @example
 * ```ts
 * parentPort.postMessage({ type: "status", status: job.status() } satisfies FromSubtaskThread);
 * ```
 */
export type FromSubtaskThread =
  | { readonly type: "status"; readonly status: JobStatus }
  | { readonly type: "metrics"; readonly id: number; readonly json: unknown[] }
  | SubtaskEnding;
