import { ConfigurationError } from "../errors/onceflow-error.js";
import type { Metrics } from "../observability/metrics.js";
import type { JobLaunchOptions } from "../runtime/job-launch-options.js";
import type { JobStatus } from "../runtime/job-status.js";
import type { RestoreSetting } from "../runtime/restore/restore-plan.js";

/** What the launch checks of a job: the runtime's `Job` has both (duck-typed). */
interface LaunchableJob {
  attachMetrics?(metrics: Metrics): void;
  status?(): JobStatus;
}

const CREATE_JOB_HINT =
  "export createJob(launch) instead and spread launch into the options: new Job({ jobId, …, ...launch })";

/**
 * The {@link JobLaunchOptions} `onceflow run` hands to `createJob(launch)`: only what was asked for.
 *
 * @example
 * ```ts
 * launchOptionsOf(2, undefined); // { subtaskIndex: 2 }
 * launchOptionsOf(undefined, undefined, { checkpointId: 7 }); // { restore: { checkpointId: 7 } }
 * ```
 */
export function launchOptionsOf(
  subtaskIndex: number | undefined,
  metrics: Metrics | undefined,
  restore?: RestoreSetting,
): JobLaunchOptions {
  return {
    ...(subtaskIndex === undefined ? {} : { subtaskIndex }),
    ...(metrics === undefined ? {} : { metrics }),
    ...(restore === undefined ? {} : { restore }),
  };
}

/**
 * Applies the launch to a job the module built itself (a `job` export): metrics are attached
 * (`job.attachMetrics`), but the subtask is fixed when a job is constructed, so `--subtask` needs
 * `createJob(launch)` — a `CONFIGURATION` error says so. `--allow-non-restored-state` likewise: a job's
 * options are fixed when it is constructed.
 *
 * @example
 * ```ts
 * applyLaunchToPrebuiltJob(job, "job", { metrics });
 * ```
 */
export function applyLaunchToPrebuiltJob(
  job: LaunchableJob,
  exportName: string,
  launch: JobLaunchOptions,
): void {
  if (launch.allowNonRestoredState === true) {
    throw new ConfigurationError(
      "--allow-non-restored-state",
      `export "${exportName}" is a job already built, and its options are fixed when it is constructed: set allowNonRestoredState: true in its options, or ${CREATE_JOB_HINT}`,
    );
  }
  if (launch.subtaskIndex !== undefined) {
    throw new ConfigurationError(
      "--subtask",
      `export "${exportName}" is a job already built, and a job's subtask is fixed when it is constructed: ${CREATE_JOB_HINT}`,
    );
  }
  if (launch.restore !== undefined) {
    throw new ConfigurationError(
      "--restore",
      `export "${exportName}" is a job already built, and where a job starts is fixed when it is constructed: ${CREATE_JOB_HINT}`,
    );
  }
  if (launch.metrics === undefined) return;
  if (typeof job.attachMetrics !== "function") {
    throw new ConfigurationError(
      "--metrics-port",
      `export "${exportName}" has no attachMetrics(): use a Job from @onceflow/core, or ${CREATE_JOB_HINT}`,
    );
  }
  job.attachMetrics(launch.metrics);
}

/**
 * Checks that `createJob(launch)` used the launch's subtask (a job that ignores it would run every
 * subtask in each process, and the processes would fence each other).
 *
 * @example
 * ```ts
 * checkLaunchHonoured(await createJob(launch), "createJob", launch);
 * ```
 */
export function checkLaunchHonoured(job: LaunchableJob, exportName: string, launch: JobLaunchOptions): void {
  if (launch.subtaskIndex === undefined || typeof job.status !== "function") return;
  const runs = job.status().subtaskIndexes;
  if (runs.length === 1 && runs[0] === launch.subtaskIndex) return;
  throw new ConfigurationError(
    "--subtask",
    `${exportName}(launch) returned a job that runs subtask(s) ${runs.join(", ")}, not ${launch.subtaskIndex}: spread launch into the options, new Job({ jobId, …, ...launch })`,
  );
}
