import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { type ResourceLimits, Worker } from "node:worker_threads";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { ConfigurationError, ErrorCode, OnceflowError } from "../errors/onceflow-error.js";
import type { JobStatus } from "../runtime/job-status.js";
import type { RestoreSetting } from "../runtime/restore/restore-plan.js";
import type { StreamNode } from "../runtime/stream-graph.js";
import { type AggregatedMetrics, aggregateMetrics, loadPromClient } from "./aggregate-metrics.js";
import { combineStatuses, startingStatus } from "./combine-statuses.js";
import { runCoordinatedThreads } from "./run-coordinated-threads.js";
import { checkThreadExchange } from "./thread-exchange-operators.js";
import { buildThreadJob, pickJobFactory, type ThreadJob, threadPlanOf } from "./thread-job.js";
import type {
  FromSubtaskThread,
  SubtaskEnding,
  SubtaskThreadData,
  ToSubtaskThread,
} from "./thread-messages.js";

/**
 * Options of {@link runSubtasksInThreads}.
 *
 * @example
 * ```ts
 * const options: SubtaskThreadsOptions = { module: "./dist/job.js", metrics: true, handleSignals: true };
 * ```
 */
export interface SubtaskThreadsOptions {
  /** The job module: a path (relative to the current folder) or a `file:` URL. */
  readonly module: string | URL;
  /** The export that builds the job from its `JobLaunchOptions` (default `createJob`). */
  readonly exportName?: string;
  /** Each thread reports into a prom-client registry; `metrics()` merges them (needs prom-client). */
  readonly metrics?: boolean;
  /** Stop every thread with a final checkpoint on SIGTERM/SIGINT (default false; the CLI turns it on). */
  readonly handleSignals?: boolean;
  /** How often each thread posts its job's status to the main thread (default 500 ms). */
  readonly statusIntervalMs?: number;
  /**
   * Where every thread's job starts (`JobLaunchOptions.restore`, the CLI's `--restore`). `"none"` and
   * a checkpoint id are applied once, by the first thread; the others go on from the lineage it starts.
   */
  readonly restore?: RestoreSetting;
  /**
   * The V8 heap limits of each subtask's thread (`worker_threads` `resourceLimits`), in MiB, over
   * the default `{ maxYoungGenerationSizeMb: 48 }` (V8's own sizing, written out). A thread past
   * `maxOldGenerationSizeMb` dies alone with `ERR_WORKER_OUT_OF_MEMORY` and the others stop with a
   * final checkpoint, instead of the whole process running out of memory. A smaller young
   * generation trades CPU for memory: in the Kafka benchmark (two threads, 5 M records) 12 MiB gave
   * a median RSS of 222–230 MiB against 254–274, for about 14 % less throughput and 25 % more CPU
   * per record (medians of three).
   */
  readonly resourceLimits?: ResourceLimits;
  /**
   * Hand `allowNonRestoredState: true` to every thread's `createJob(launch)`: state of the checkpoint
   * that no operator claims is dropped with a warning instead of failing the restore.
   */
  readonly allowNonRestoredState?: boolean;
}

/**
 * How one subtask's job ended: its `JobResult` (`endedBy`, `lastCheckpointId`, …) and its thread.
 *
 * @example
 * ```ts
 * const { subtaskIndex, endedBy, lastCheckpointId } = result.subtasks[0]!;
 * ```
 */
export type SubtaskThreadResult = Readonly<Record<string, unknown>> & {
  readonly subtaskIndex: number;
  readonly threadId: number;
};

/**
 * How a run in threads ended: every subtask's result.
 *
 * @example
 * ```ts
 * const { jobId, parallelism, subtasks } = await threads.finished;
 * ```
 */
export interface SubtaskThreadsResult {
  readonly jobId: string;
  readonly parallelism: number;
  readonly subtasks: readonly SubtaskThreadResult[];
}

/**
 * A job running as one worker thread per subtask in this process.
 *
 * @example
 * ```ts
 * const threads = await runSubtasksInThreads({ module: "./job.js" });
 * setTimeout(() => threads.stop(), 60_000);
 * await threads.finished;
 * ```
 */
export interface SubtaskThreads {
  readonly jobId: string;
  /** How many subtasks, so how many threads. */
  readonly parallelism: number;
  /** The `threadId` of each subtask's thread, by subtask index. */
  readonly threadIds: readonly number[];
  /** The threads' statuses combined: live and ready only when every thread is (see `combineStatuses`). */
  status(): JobStatus;
  /** The threads' Prometheus registries merged (with `metrics: true`); each series has its `subtask`. */
  metrics(): Promise<AggregatedMetrics>;
  /** The job's checkpoint storage, as the main thread built it (for the dashboard). */
  checkpointStorage(): CheckpointStorage | undefined;
  /** Stops every thread's job with a final checkpoint. */
  stop(): void;
  /**
   * Resolves when every thread's job ended well; rejects with the first failure otherwise (a job
   * that failed, or a thread that died) after the other threads stopped with a final checkpoint.
   */
  readonly finished: Promise<SubtaskThreadsResult>;
}

const DEFAULT_STATUS_INTERVAL_MS = 500;
/**
 * Each subtask thread's heap limits unless told otherwise (see `SubtaskThreadsOptions.resourceLimits`).
 * 12 MiB until the Kafka sink stopped holding records across a round trip: since then the smaller
 * young generation saves about 13 % of the memory for about 14 % of the throughput (bench/README.md, memory).
 */
const DEFAULT_RESOURCE_LIMITS: ResourceLimits = { maxYoungGenerationSizeMb: 48 };
// A thread whose job ended but that a client's socket keeps alive is terminated after this long.
const EXIT_GRACE_MS = 2000;
// A thread that does not answer a metrics request in this long is left out of that scrape.
const METRICS_TIMEOUT_MS = 5000;

/**
 * Runs a job's subtasks in worker threads of this process, one thread per subtask, so that one
 * Node process uses as many cores as the job has subtasks. Each thread is exactly the
 * one-process-per-subtask topology of `onceflow run --subtask <i>`: it imports the module, builds
 * the job with `createJob({ subtaskIndex: i })`, and executes it — claiming its own incarnation
 * scope in the shared checkpoint storage and checkpointing on its own. The main thread builds the
 * job once without running it, to read its parallelism and to refuse, with a `CONFIGURATION`
 * error, a job the threads cannot run (checkpointing off, or in-memory checkpoints, at
 * parallelism above 1; a module without a `createJob` function).
 *
 * A job whose `keyBy` needs an exchange (parallelism above 1) runs differently: the main thread
 * builds it once more and runs it as the single checkpoint coordinator of the threads, which
 * exchange records by key group through bounded channels (see `runCoordinatedThreads`); its
 * checkpoints are in the whole job's scope, as those of one process running every subtask.
 *
 * @example
 * ```ts
 * import { runSubtasksInThreads } from "@onceflow/core";
 *
 * const threads = await runSubtasksInThreads({ module: new URL("./job.js", import.meta.url), handleSignals: true });
 * console.log(`${threads.parallelism} subtasks of ${threads.jobId} in threads ${threads.threadIds.join(", ")}`);
 * const { subtasks } = await threads.finished; // SIGTERM: every thread stops with a final checkpoint
 * ```
 */
export async function runSubtasksInThreads(options: SubtaskThreadsOptions): Promise<SubtaskThreads> {
  const resourceLimits = checkResourceLimits(options.resourceLimits);
  const moduleUrl = moduleUrlOf(options.module);
  const exports = (await import(moduleUrl).catch((cause: unknown) => {
    throw new ConfigurationError(
      "module",
      `cannot import ${moduleUrl}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  })) as Record<string, unknown>;
  // Built once here, never executed: it tells the parallelism and is checked for threads.
  const factory = pickJobFactory(exports, options.exportName);
  const probe: ThreadJob = await buildThreadJob(factory, {});
  const plan = threadPlanOf(probe);
  const checkpointInterval = probe.status().checkpointInterval;
  if (options.metrics === true) await loadPromClient();

  const script = new URL("./subtask-thread.js", import.meta.url);
  const dataOf = (subtaskIndex: number): SubtaskThreadData => ({
    moduleUrl,
    exportName: options.exportName ?? "createJob",
    subtaskIndex,
    ...(options.restore === undefined ? {} : { restore: options.restore }),
    metrics: options.metrics === true,
    statusIntervalMs: options.statusIntervalMs ?? DEFAULT_STATUS_INTERVAL_MS,
    allowNonRestoredState: options.allowNonRestoredState === true,
  });
  const nodes = (probe as { streamNodes?: readonly StreamNode[] }).streamNodes;
  if (nodes !== undefined && checkThreadExchange(nodes, plan.parallelism)) {
    return runCoordinatedThreads(options, factory, plan.parallelism, script, dataOf, resourceLimits);
  }
  const threads = Array.from({ length: plan.parallelism }, (_, subtaskIndex) =>
    startThread(script, dataOf(subtaskIndex), resourceLimits),
  );
  for (const thread of threads) thread.status = startingStatus(plan.jobId, thread.index, checkpointInterval);

  let firstFailure: OnceflowError | undefined;
  const stop = (): void => {
    for (const thread of threads) thread.send({ type: "stop" });
  };
  const fail = (error: OnceflowError): void => {
    firstFailure ??= error;
    stop();
  };
  for (const thread of threads) thread.onFailure = fail;
  const removeSignals = options.handleSignals === true ? onSignals(stop) : () => {};

  const finished = Promise.all(threads.map((thread) => thread.exited)).then(() => {
    removeSignals();
    if (firstFailure !== undefined) throw firstFailure;
    return {
      jobId: plan.jobId,
      parallelism: plan.parallelism,
      subtasks: threads.map((thread) => ({
        ...(thread.ending?.type === "finished" ? thread.ending.result : {}),
        subtaskIndex: thread.index,
        threadId: thread.threadId,
      })),
    };
  });
  // The caller may attach to `finished` late (after starting services): no unhandled rejection.
  finished.catch(() => undefined);

  return {
    jobId: plan.jobId,
    parallelism: plan.parallelism,
    threadIds: threads.map((thread) => thread.threadId),
    status: () => combineStatuses(threads.map((thread) => thread.status)),
    metrics: async () => aggregateMetrics(await Promise.all(threads.map((thread) => thread.metricsJson()))),
    checkpointStorage: () => probe.checkpointStorage(),
    stop,
    finished,
  };
}

/** The main thread's view of one subtask thread. */
interface SubtaskThread {
  readonly index: number;
  readonly threadId: number;
  status: JobStatus;
  ending: SubtaskEnding | undefined;
  onFailure: (error: OnceflowError) => void;
  readonly exited: Promise<void>;
  send(message: ToSubtaskThread): void;
  metricsJson(): Promise<unknown[]>;
}

function startThread(script: URL, data: SubtaskThreadData, resourceLimits: ResourceLimits): SubtaskThread {
  const worker = new Worker(script, {
    workerData: data,
    resourceLimits,
  });
  const pendingMetrics = new Map<number, (json: unknown[]) => void>();
  let nextRequest = 0;
  let alive = true;
  const name = `subtask ${data.subtaskIndex} (thread ${worker.threadId})`;
  const thread: SubtaskThread = {
    index: data.subtaskIndex,
    threadId: worker.threadId,
    status: startingStatus("", data.subtaskIndex),
    ending: undefined,
    onFailure: () => {},
    exited: new Promise<void>((resolveExit) => {
      worker.once("exit", (exitCode) => {
        alive = false;
        for (const answer of pendingMetrics.values()) answer([]);
        pendingMetrics.clear();
        if (thread.ending === undefined) {
          thread.onFailure(
            new OnceflowError(
              "JOB_FAILED",
              `the thread of ${name} exited with code ${exitCode} before its job ended`,
            ),
          );
        }
        resolveExit();
      });
    }),
    send: (message) => {
      if (alive) worker.postMessage(message);
    },
    metricsJson: () => {
      if (!alive) return Promise.resolve([]);
      const id = nextRequest++;
      return new Promise<unknown[]>((answer) => {
        const timer = setTimeout(() => {
          pendingMetrics.delete(id);
          answer([]);
        }, METRICS_TIMEOUT_MS);
        pendingMetrics.set(id, (json) => {
          clearTimeout(timer);
          answer(json);
        });
        worker.postMessage({ type: "metrics", id } satisfies ToSubtaskThread);
      });
    },
  };
  worker.on("message", (message: FromSubtaskThread) => {
    switch (message.type) {
      case "status":
        thread.status = message.status;
        return;
      case "metrics":
        pendingMetrics.get(message.id)?.(message.json);
        pendingMetrics.delete(message.id);
        return;
      default:
        thread.ending = message;
        if (message.type === "failed") {
          thread.onFailure(new OnceflowError(errorCodeOf(message.code), `${name}: ${message.message}`));
        }
        setTimeout(() => void worker.terminate(), EXIT_GRACE_MS).unref();
    }
  });
  worker.on("error", (error) => {
    // An uncaught error killed the thread (its job cannot have ended well); `exit` follows.
    thread.ending ??= { type: "failed", code: "JOB_FAILED", message: error.message };
    thread.onFailure(new OnceflowError("JOB_FAILED", `the thread of ${name} died: ${error.message}`));
  });
  return thread;
}

const RESOURCE_LIMITS = [
  "maxYoungGenerationSizeMb",
  "maxOldGenerationSizeMb",
  "codeRangeSizeMb",
  "stackSizeMb",
] as const;

function checkResourceLimits(limits: ResourceLimits | undefined): ResourceLimits {
  if (limits === undefined) return DEFAULT_RESOURCE_LIMITS;
  for (const [name, value] of Object.entries(limits)) {
    if (!(RESOURCE_LIMITS as readonly string[]).includes(name)) {
      throw new ConfigurationError(
        `resourceLimits.${name}`,
        `is not a worker thread limit; use ${RESOURCE_LIMITS.join(", ")}`,
      );
    }
    if (value !== undefined && !(typeof value === "number" && Number.isFinite(value) && value > 0)) {
      throw new ConfigurationError(
        `resourceLimits.${name}`,
        `must be a number of MiB above 0, got ${JSON.stringify(value)}`,
      );
    }
  }
  return { ...DEFAULT_RESOURCE_LIMITS, ...limits };
}

const CODES = new Set<string>(Object.values(ErrorCode));
const errorCodeOf = (code: string): ErrorCode => (CODES.has(code) ? (code as ErrorCode) : "JOB_FAILED");

function moduleUrlOf(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (/^file:/.test(module)) return module;
  return pathToFileURL(resolve(process.cwd(), module)).href;
}

function onSignals(stop: () => void): () => void {
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return () => {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
  };
}
