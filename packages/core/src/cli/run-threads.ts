import { pathToFileURL } from "node:url";
import { registerDefaultMetrics } from "../observability/default-process-metrics.js";
import { loadPromClient } from "../threads/aggregate-metrics.js";
import { runSubtasksInThreads } from "../threads/run-subtasks-in-threads.js";
import type { CliIo } from "./io.js";
import type { RunFlags } from "./run-flags.js";
import { type ServedMetrics, startRunServices } from "./run-services.js";

/**
 * `onceflow run <module> --threads`: runs every subtask of the job in a worker thread of this
 * process (see `runSubtasksInThreads`), with the same services as a plain run — `/metrics` merges
 * the threads' registries, `/healthz` and `/readyz` judge the threads' statuses together. SIGTERM
 * and SIGINT stop every thread with a final checkpoint; it resolves when all ended well and
 * rejects with the first failure otherwise.
 *
 * @example
 * ```ts
 * await runJobInThreads("/app/job.js", parseRunFlags({ threads: true }, process.env), processIo());
 * ```
 */
export async function runJobInThreads(modulePath: string, flags: RunFlags, io: CliIo): Promise<void> {
  const promClient =
    flags.metricsPort !== undefined
      ? await loadPromClient()
      : flags.uiPort !== undefined
        ? // The dashboard shows live metrics when prom-client is there, and goes on without them.
          await loadPromClient().catch(() => undefined)
        : undefined;
  const threads = await runSubtasksInThreads({
    module: pathToFileURL(modulePath),
    ...(flags.jobExport === undefined ? {} : { exportName: flags.jobExport }),
    ...(flags.allowNonRestoredState ? { allowNonRestoredState: true } : {}),
    metrics: promClient !== undefined,
    handleSignals: true,
    resourceLimits: flags.threadResourceLimits,
    ...(flags.restore === undefined ? {} : { restore: flags.restore }),
  });
  io.stdout(
    `running ${threads.parallelism} subtask(s) of ${threads.jobId} in threads ${threads.threadIds.join(", ")} of process ${process.pid}\n`,
  );
  // The process's own metrics (process_*, nodejs_*), once, beside the threads' merged registries.
  const processRegistry =
    promClient !== undefined && flags.defaultMetrics ? new promClient.Registry() : undefined;
  if (processRegistry !== undefined && promClient !== undefined)
    registerDefaultMetrics(promClient, processRegistry);
  const served: ServedMetrics | undefined =
    promClient === undefined
      ? undefined
      : {
          registry: {
            metrics: async () => (await threads.metrics()).text + ((await processRegistry?.metrics()) ?? ""),
            contentType: promClient.Registry.PROMETHEUS_CONTENT_TYPE,
          },
        };
  let services: { close(): Promise<void> };
  try {
    services = await startRunServices(
      {
        jobId: threads.jobId,
        status: () => threads.status(),
        checkpointStorage: () => threads.checkpointStorage(),
      },
      flags,
      served,
      io,
    );
  } catch (error) {
    threads.stop();
    await threads.finished.catch(() => undefined);
    throw error;
  }
  try {
    const result = await threads.finished;
    io.stdout(`job finished in ${result.parallelism} thread(s): ${JSON.stringify(result.subtasks)}\n`);
  } finally {
    await services.close();
  }
}
