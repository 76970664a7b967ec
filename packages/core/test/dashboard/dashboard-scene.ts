import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileSystemCheckpointStorage } from "../../src/checkpoint/filesystem-checkpoint-storage.js";
import { type Dashboard, serveDashboard } from "../../src/dashboard/serve-dashboard.js";
import { runSampleJob, type SampleJob } from "../../src/dashboard/testing/run-sample-job.js";
import { prometheusMetrics } from "../../src/observability/prometheus-metrics.js";

/** A dashboard over a real job that runs while the page looks: what the browser test and the README screenshot show. */
export interface DashboardScene {
  readonly dashboard: Dashboard;
  /** Resolves when the job has ended (it restarts once after its failed checkpoint). */
  readonly job: Promise<SampleJob>;
  close(): Promise<void>;
}

/**
 * Serves the dashboard of job `dashboard-sample` (filesystem checkpoints in a temporary folder, live
 * metrics from an in-process prom-client registry), then starts the job: `count` records at
 * `recordsPerSecond`, with the snapshot of checkpoint `failCheckpoint` failing once.
 */
export async function startDashboardScene(options: {
  count: number;
  recordsPerSecond: number;
  failCheckpoint: number;
}): Promise<DashboardScene> {
  const root = await mkdtemp(join(tmpdir(), "onceflow-dashboard-scene-"));
  const metrics = prometheusMetrics();
  const jobId = "dashboard-sample";
  // The folder the job writes to, opened on its own: the dashboard reads while the job writes.
  const dashboard = await serveDashboard({
    storage: new FileSystemCheckpointStorage(join(root, "checkpoints")),
    jobId,
    port: 0,
    metricsText: () => metrics.registry.metrics(),
  });
  const job = runSampleJob({ root, jobId, metrics, ...options });
  job.catch(() => undefined);
  return {
    dashboard,
    job,
    close: async () => {
      await job.catch(() => undefined);
      await dashboard.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}
