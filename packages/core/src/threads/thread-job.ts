import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { asOnceflowError, ConfigurationError, isOnceflowError } from "../errors/onceflow-error.js";
import type { JobLaunchOptions } from "../runtime/job-launch-options.js";
import type { JobStatus } from "../runtime/job-status.js";

/**
 * What running a job in threads needs of it: the runtime's `Job` has all of it (duck-typed, since
 * the module may load another copy of `@onceflow/core` than the launcher).
 *
 * @example
 * ```ts
 * const job: ThreadJob = createJob({ subtaskIndex: 1 });
 * ```
 */
export interface ThreadJob {
  readonly jobId: string;
  execute(): Promise<unknown>;
  stop(): void;
  status(): JobStatus;
  checkpointStorage(): CheckpointStorage | undefined;
}

/** Builds the job of one subtask (the module's `createJob(launch)`). */
export type JobFactory = (launch: JobLaunchOptions) => unknown;

/**
 * The export of a job module that builds its job: `exportName`, or `createJob`. Threads need a
 * function: each thread builds its own job for its own subtask, which a `job` built at import
 * cannot be (its subtask is fixed when it is constructed). Throws a `CONFIGURATION` error saying
 * what to export otherwise.
 *
 * @example
 * ```ts
 * const factory = pickJobFactory(await import("./job.js"), undefined);
 * ```
 */
export function pickJobFactory(exports: Record<string, unknown>, exportName: string | undefined): JobFactory {
  const name = exportName ?? "createJob";
  const available = Object.keys(exports).sort().join(", ") || "nothing";
  const candidate = exports[name];
  if (typeof candidate === "function") return candidate as JobFactory;
  const hint =
    "export createJob(launch) that spreads launch into the options: new Job({ jobId, …, ...launch })";
  if (candidate === undefined) {
    throw new ConfigurationError(
      exportName === undefined ? "module" : "exportName",
      `the module has no export "${name}" (it exports ${available}); running subtasks in threads needs a function that builds the job: ${hint}`,
    );
  }
  throw new ConfigurationError(
    exportName === undefined ? "module" : "exportName",
    `export "${name}" is not a function; each thread builds the job of its own subtask, so ${hint}`,
  );
}

/**
 * Calls the factory with `launch` and checks the result: a `Job` of `@onceflow/core` that runs
 * exactly `launch.subtaskIndex` when one was given (a factory that ignores it would run every
 * subtask in each thread, and the threads would fence each other).
 *
 * @example
 * ```ts
 * const job = await buildThreadJob(factory, { subtaskIndex: 0 });
 * ```
 */
export async function buildThreadJob(factory: JobFactory, launch: JobLaunchOptions): Promise<ThreadJob> {
  let job: unknown;
  try {
    job = await factory(launch);
  } catch (error) {
    throw isOnceflowError(error) ? error : asOnceflowError(error, "CONFIGURATION");
  }
  if (!isThreadJob(job)) {
    throw new ConfigurationError(
      "module",
      "the job factory did not return a Job of @onceflow/core (an object with jobId, execute(), stop(), status() and checkpointStorage())",
    );
  }
  const runs = job.status().subtaskIndexes;
  if (launch.subtaskIndex !== undefined && !(runs.length === 1 && runs[0] === launch.subtaskIndex)) {
    throw new ConfigurationError(
      "module",
      `the job factory returned a job that runs subtask(s) ${runs.join(", ")}, not ${launch.subtaskIndex}: spread launch into the options, new Job({ jobId, …, ...launch })`,
    );
  }
  return job;
}

/**
 * What the main thread learns of a job before it starts the threads.
 *
 * @example
 * ```ts
 * const { jobId, parallelism } = threadPlanOf(await buildThreadJob(factory, {}));
 * ```
 */
export interface ThreadPlan {
  readonly jobId: string;
  /** How many subtasks, so how many threads. */
  readonly parallelism: number;
}

/**
 * Reads the parallelism of a job built without a subtask (it runs all of them, so its
 * `status().subtaskIndexes` are `0 … parallelism − 1`) and refuses what threads cannot run: at
 * parallelism above 1, every thread checkpoints its own subtask on its own (the per-subtask
 * topology), so checkpointing must be on and the storage one the threads share — not `"memory"`,
 * of which each thread would have its own copy.
 *
 * @example
 * ```ts
 * const plan = threadPlanOf(await buildThreadJob(createJob, {})); // { jobId: "orders", parallelism: 2 }
 * ```
 */
export function threadPlanOf(job: ThreadJob): ThreadPlan {
  const status = job.status();
  const parallelism = status.subtaskIndexes.length;
  if (parallelism > 1 && status.checkpointInterval === undefined) {
    throw new ConfigurationError(
      "checkpointing",
      `job ${job.jobId} runs ${parallelism} subtasks without checkpointing; in threads every subtask restores and commits from its own checkpoints: turn checkpointing on with a filesystem or PostgreSQL storage, e.g. checkpointing: { interval: 1000, storage: filesystem("./checkpoints") }`,
    );
  }
  const storage = job.checkpointStorage();
  if (parallelism > 1 && storage?.description === "memory") {
    throw new ConfigurationError(
      "checkpointing.storage",
      `job ${job.jobId} keeps its checkpoints in memory, and each of its ${parallelism} threads would have its own copy (nothing survives the process either): use a storage the threads share, filesystem("./checkpoints") or the PostgreSQL one`,
    );
  }
  return { jobId: job.jobId, parallelism };
}

function isThreadJob(value: unknown): value is ThreadJob {
  if (typeof value !== "object" || value === null) return false;
  const job = value as Record<string, unknown>;
  return (
    typeof job.jobId === "string" &&
    ["execute", "stop", "status", "checkpointStorage"].every((name) => typeof job[name] === "function")
  );
}
