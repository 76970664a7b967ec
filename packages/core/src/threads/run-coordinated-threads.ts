import type { ResourceLimits } from "node:worker_threads";
import { loadPrometheusMetrics } from "../cli/load-prometheus.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import type { PrometheusMetrics } from "../observability/prometheus-metrics.js";
import type { SubtaskHost } from "../runtime/subtask-host.js";
import { aggregateMetrics } from "./aggregate-metrics.js";
import type { SubtaskThreads, SubtaskThreadsOptions } from "./run-subtasks-in-threads.js";
import { buildThreadJob, type JobFactory, type ThreadJob } from "./thread-job.js";
import type { SubtaskThreadData } from "./thread-messages.js";
import { ThreadSubtaskHost } from "./thread-subtask-host.js";

/** What the coordinating job must offer (the runtime's `Job` does; duck-typed like `ThreadJob`). */
interface CoordinatingJob extends ThreadJob {
  executeHosted(host: SubtaskHost): Promise<Readonly<Record<string, unknown>>>;
}

/**
 * Runs a job whose `keyBy` exchanges records between the subtask threads: the main thread builds
 * the job once more (with the launch's `restore` and `allowNonRestoredState`) and runs it as the
 * single coordinator of every thread — one incarnation and one scope for the whole job, as a
 * process that runs every subtask in one event loop has: it plans each attempt's restore once
 * (rescaling keyed state by key group), triggers every checkpoint in all threads, stores it and
 * tells them when it completed. A thread that dies fails the attempt; the restart starts every
 * thread again from the latest checkpoint.
 */
export async function runCoordinatedThreads(
  options: SubtaskThreadsOptions,
  factory: JobFactory,
  parallelism: number,
  script: URL,
  dataOf: (subtaskIndex: number) => SubtaskThreadData,
  resourceLimits: ResourceLimits,
): Promise<SubtaskThreads> {
  let metrics: PrometheusMetrics | undefined;
  // The job-level series (checkpoints, restarts) come from the coordinator here (the launcher
  // adds the process's own ones).
  if (options.metrics === true) metrics = await loadPrometheusMetrics(undefined, { defaultMetrics: false });
  const built = await buildThreadJob(factory, {
    ...(options.allowNonRestoredState === true ? { allowNonRestoredState: true } : {}),
    ...(metrics === undefined ? {} : { metrics }),
    ...(options.restore === undefined ? {} : { restore: options.restore }),
  });
  if (typeof (built as Partial<CoordinatingJob>).executeHosted !== "function") {
    throw new ConfigurationError(
      "module",
      "the job module's @onceflow/core cannot coordinate subtask threads (a keyBy exchange in threads needs the same version in the module and the launcher)",
    );
  }
  const job = built as CoordinatingJob;
  const host = new ThreadSubtaskHost(script, dataOf, resourceLimits, parallelism);
  const stop = (): void => job.stop();
  const removeSignals = options.handleSignals === true ? onSignals(stop) : () => {};
  const finished = job.executeHosted(host).then(
    (result) => {
      removeSignals();
      return {
        jobId: job.jobId,
        parallelism,
        subtasks: host.threadIds.map((threadId, subtaskIndex) => ({ ...result, subtaskIndex, threadId })),
      };
    },
    (error: unknown) => {
      removeSignals();
      host.terminate();
      throw error;
    },
  );
  finished.catch(() => undefined);
  return {
    jobId: job.jobId,
    parallelism,
    get threadIds() {
      return host.threadIds;
    },
    status: () => job.status(),
    metrics: async () => {
      const own = metrics === undefined ? [] : await metrics.registry.getMetricsAsJSON();
      return aggregateMetrics([own, ...(await host.metricsJson())]);
    },
    checkpointStorage: () => job.checkpointStorage(),
    stop,
    finished,
  };
}

function onSignals(stop: () => void): () => void {
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return () => {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
  };
}
