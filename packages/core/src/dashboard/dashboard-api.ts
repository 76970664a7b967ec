import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { CheckpointHistoryReader } from "./checkpoint-history.js";
import { DASHBOARD_FAVICON, dashboardPage } from "./dashboard-page.js";
import { LiveMetricsTracker } from "./live-metrics.js";

/** Where the dashboard reads a job from. */
export interface DashboardSources {
  readonly storage: CheckpointStorage;
  readonly jobId: string;
  /** The job's metrics in the Prometheus text format, in process (for example a prom-client registry's `metrics()`). */
  readonly metricsText?: () => Promise<string> | string;
  /** Or a running job's metrics endpoint to fetch them from, such as `http://127.0.0.1:9464/metrics`. */
  readonly metricsUrl?: string;
}

/** An answer of the dashboard: status, content type and body. */
export interface DashboardResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

// A job's metrics endpoint that does not answer within this time counts as unavailable for this poll.
const SCRAPE_TIMEOUT_MS = 3_000;

/**
 * The dashboard's routes, without HTTP: `GET /` (the page), `/api/checkpoints` (the checkpoint
 * history from the storage) and `/api/live` (the job's live metrics). `serveDashboard` puts them
 * behind a server; tests call `get` directly.
 *
 * @example
 * ```ts
 * const api = createDashboardApi({ storage: filesystem("./checkpoints"), jobId: "orders" });
 * const { status, body } = await api.get("/api/checkpoints");
 * ```
 */
export function createDashboardApi(sources: DashboardSources): {
  get(path: string): Promise<DashboardResponse>;
} {
  const history = new CheckpointHistoryReader(sources.storage, sources.jobId);
  const tracker = new LiveMetricsTracker(sources.jobId);
  const scrape = metricsScraper(sources);
  return {
    async get(path: string): Promise<DashboardResponse> {
      const route = path.split("?")[0];
      if (route === "/" || route === "/index.html") {
        return { status: 200, contentType: "text/html; charset=utf-8", body: dashboardPage(sources.jobId) };
      }
      if (route === "/favicon.svg" || route === "/favicon.ico") {
        return { status: 200, contentType: "image/svg+xml", body: DASHBOARD_FAVICON };
      }
      if (route === "/api/checkpoints") {
        try {
          return json(200, await history.read());
        } catch (error) {
          return json(503, { error: `cannot read ${sources.storage.description}: ${messageOf(error)}` });
        }
      }
      if (route === "/api/live") {
        if (scrape === undefined) {
          return json(200, tracker.unavailable("no metrics source: give metricsText or --metrics-url"));
        }
        try {
          return json(200, tracker.update(await scrape()));
        } catch (error) {
          return json(200, tracker.unavailable(`cannot read the metrics: ${messageOf(error)}`));
        }
      }
      return json(404, {
        error: `no such page: ${route}; the dashboard serves /, /favicon.svg, /api/checkpoints and /api/live`,
      });
    },
  };
}

function metricsScraper(sources: DashboardSources): (() => Promise<string>) | undefined {
  const { metricsText, metricsUrl } = sources;
  if (metricsText !== undefined) return async () => metricsText();
  if (metricsUrl === undefined) return undefined;
  return async () => {
    const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
    if (!response.ok)
      throw new Error(`the metrics endpoint answered ${response.status} ${response.statusText}`);
    return response.text();
  };
}

function json(status: number, value: unknown): DashboardResponse {
  // Non-finite numbers (NaN, +Inf from the metrics) are not JSON: they become null.
  return { status, contentType: "application/json; charset=utf-8", body: JSON.stringify(value) };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
