import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { serveDashboard } from "../dashboard/serve-dashboard.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { defaultMaxCheckpointAge } from "../runtime/job-health.js";
import type { JobStatus } from "../runtime/job-status.js";
import type { CliIo } from "./io.js";
import type { RunFlags } from "./run-flags.js";
import { serveEndpoints } from "./serve-endpoints.js";

/**
 * What the services beside a job need of it: the runtime's `Job` has all of it.
 *
 * @example
 * ```ts
 * const observed: ObservableJob = job;
 * ```
 */
export interface ObservableJob {
  readonly jobId?: string;
  status?(): JobStatus;
  checkpointStorage?(): CheckpointStorage | undefined;
}

/**
 * Where the services read the metrics text: a prom-client registry (`PrometheusMetrics` fits), or
 * the merged registries of a job's threads.
 *
 * @example
 * ```ts
 * const served: ServedMetrics = prometheusMetrics();
 * ```
 */
export interface ServedMetrics {
  readonly registry: { metrics(): Promise<string>; readonly contentType: string };
}

/**
 * The services `onceflow run` starts beside the job: the metrics and health endpoints
 * (`--metrics-port`) and the checkpoint dashboard (`--ui-port`). `close` stops them.
 *
 * @example
 * ```ts
 * const services = await startRunServices(job, flags, metrics, io);
 * try { await job.execute(); } finally { await services.close(); }
 * ```
 */
export async function startRunServices(
  job: ObservableJob,
  flags: RunFlags,
  metrics: ServedMetrics | undefined,
  io: CliIo,
): Promise<{ close(): Promise<void> }> {
  const closers: Array<() => Promise<void>> = [];
  const close = async (): Promise<void> => {
    for (const closer of closers.splice(0).reverse()) await closer().catch(() => undefined);
  };
  try {
    const metricsText = metrics === undefined ? undefined : () => metrics.registry.metrics();
    if (flags.metricsPort !== undefined && metrics !== undefined) {
      const status = statusOf(job, "--metrics-port");
      const endpoints = await serveEndpoints({
        port: flags.metricsPort,
        host: flags.metricsHost,
        metrics: { text: () => metrics.registry.metrics(), contentType: metrics.registry.contentType },
        status,
        maxCheckpointAgeMs:
          flags.readyMaxCheckpointAgeMs ?? defaultMaxCheckpointAge(status().checkpointInterval),
      });
      closers.push(() => endpoints.close());
      io.stdout(`metrics on ${endpoints.url}/metrics, health on ${endpoints.url}/healthz and /readyz\n`);
    }
    if (flags.uiPort !== undefined) {
      const storage = job.checkpointStorage?.();
      if (storage === undefined || job.jobId === undefined) {
        throw new ConfigurationError(
          "--ui-port",
          "the dashboard reads the job's checkpoints: the job must be a Job from @onceflow/core with checkpointing on",
        );
      }
      const dashboard = await serveDashboard({
        storage,
        jobId: job.jobId,
        port: flags.uiPort,
        host: flags.uiHost,
        ...(metricsText === undefined ? {} : { metricsText }),
      });
      closers.push(() => dashboard.close());
      io.stdout(`dashboard on ${dashboard.url}\n`);
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { close };
}

function statusOf(job: ObservableJob, flag: string): () => JobStatus {
  const status = job.status;
  if (typeof status !== "function") {
    throw new ConfigurationError(
      flag,
      "the health endpoints read job.status(): the job must be a Job from @onceflow/core",
    );
  }
  return () => status.call(job);
}
