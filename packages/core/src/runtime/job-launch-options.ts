import type { Metrics } from "../observability/metrics.js";
import type { RestoreSetting } from "./restore/restore-plan.js";

/**
 * What a launcher (the `onceflow run` CLI, a test) hands to a module's `createJob(launch)`: spread
 * it into the job's options so that `--subtask`, `--metrics-port` and
 * `--allow-non-restored-state` reach the job.
 *
 * @example
 * ```ts
 * export function createJob(launch: JobLaunchOptions = {}): Job {
 *   const job = new Job({ jobId: "orders", parallelism: 3, checkpointing: { interval: 1000 }, ...launch });
 *   // … sources, transformations, sinks
 *   return job;
 * }
 * ```
 */
export interface JobLaunchOptions {
  /** Run only this subtask in this process (`--subtask`). */
  readonly subtaskIndex?: number;
  /** Drop checkpointed state that no operator claims, with a warning (`--allow-non-restored-state`). */
  readonly allowNonRestoredState?: boolean;
  /** Report metrics here (the CLI's Prometheus registry with `--metrics-port`). */
  readonly metrics?: Metrics;
  /**
   * Where the job starts (`--restore`): `"latest"`, `"none"` or `{ checkpointId }`, the job's
   * `restore` option. `"none"` and a checkpoint are applied once (see the restore rule).
   */
  readonly restore?: RestoreSetting;
}
