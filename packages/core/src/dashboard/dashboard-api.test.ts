import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CheckpointHistory } from "./checkpoint-history.js";
import { createDashboardApi } from "./dashboard-api.js";
import type { LiveMetricsView } from "./live-metrics.js";
import { serveDashboard } from "./serve-dashboard.js";
import { runSampleJob, type SampleJob } from "./testing/run-sample-job.js";

let root: string;
let sample: SampleJob;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "onceflow-dashboard-api-"));
  // Checkpoint 3's snapshot fails: the attempt restarts from checkpoint 2 with a new incarnation.
  sample = await runSampleJob({ root, count: 1500, recordsPerSecond: 3000, failCheckpoint: 3 });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const metricsText = (inTotal: number, outTotal: number, failures: number, job = "dashboard-sample"): string =>
  [
    "# TYPE onceflow_records_in_total counter",
    `onceflow_records_in_total{job="${job}",subtask="0",operator="orders"} ${inTotal / 2}`,
    `onceflow_records_in_total{job="${job}",subtask="1",operator="orders"} ${inTotal / 2}`,
    `onceflow_records_in_total{job="another",subtask="0",operator="orders"} 99999`,
    `onceflow_records_out_total{job="${job}",subtask="0",operator="orders-file"} ${outTotal}`,
    `onceflow_checkpoint_failures_total{job="${job}"} ${failures}`,
    `onceflow_restarts_total{job="${job}"} 1`,
    `onceflow_last_completed_checkpoint_id{job="${job}"} 12`,
    `onceflow_last_completed_checkpoint_timestamp_seconds{job="${job}"} 1700000000.5`,
    `onceflow_checkpoint_duration_seconds_sum{job="${job}"} 0.03`,
    `onceflow_checkpoint_duration_seconds_count{job="${job}"} 4`,
    `onceflow_sink_pending_transactions{job="${job}",subtask="1",sink="orders-file"} 2`,
    `onceflow_sink_oldest_pending_transaction_age_seconds{job="${job}",subtask="1",sink="orders-file"} 0.25`,
    `onceflow_sink_pending_transactions{job="${job}",subtask="0",sink="orders-file"} 1`,
    `onceflow_source_lag_records{job="${job}",subtask="0",source="orders",split="generator-2"} 40`,
    `onceflow_source_lag_records{job="${job}",subtask="0",source="orders",split="generator-0"} 10`,
  ].join("\n");

describe("GET /api/checkpoints", () => {
  it("shows every stored checkpoint, the one that failed, the restart and the latest contents", async () => {
    const api = createDashboardApi({ storage: sample.storage, jobId: sample.jobId });
    const answer = await api.get("/api/checkpoints");
    expect(answer.status).toBe(200);
    expect(answer.contentType).toContain("application/json");
    const history = JSON.parse(answer.body) as CheckpointHistory;
    // The default retention keeps 3; the storage's history keeps every checkpoint of this short run.
    const stored = await sample.storage.list(sample.jobId);
    expect(stored).toHaveLength(3);
    expect(history.retained).toBe(3);
    const ids = history.checkpoints.map((c) => c.checkpointId);
    expect(ids.length).toBeGreaterThan(3);
    expect(ids).toEqual([
      1,
      2,
      ...Array.from({ length: sample.result.lastCheckpointId - 3 }, (_, i) => i + 4),
    ]);
    expect(ids.slice(-3)).toEqual(stored.map((m) => m.checkpointId));
    expect(history.checkpoints.every((c) => c.scope === "all" && c.sizeBytes > 0 && c.durationMs >= 0)).toBe(
      true,
    );
    // Checkpoint 3 failed: recorded with its reason (so not "never completed"), then checkpoint 2 restored.
    expect(history.missing).toEqual([]);
    expect(history.failures).toMatchObject([
      { checkpointId: 3, scope: "all", definitive: true, reason: expect.stringContaining("sample failure") },
    ]);
    expect(history.restores).toMatchObject([{ checkpointId: 2, scope: "all", lineage: 0 }]);
    expect(history.warning).toBeUndefined();
    expect(sample.result.restarts).toBe(1);
    // Two incarnations: before and after the restart; the first checkpoint after it is marked.
    expect(history.incarnations).toHaveLength(2);
    expect(history.incarnations[0]).toMatchObject({ firstCheckpointId: 1, lastCheckpointId: 2 });
    expect(history.incarnations[1]?.firstCheckpointId).toBe(4);
    expect(history.checkpoints.filter((c) => c.afterRestart).map((c) => c.checkpointId)).toEqual([4]);
    expect(history.claimedScopes).toEqual(["all"]);
    const latest = history.latest[0]!;
    expect(latest.checkpointId).toBe(sample.result.lastCheckpointId);
    const pending = latest.transactions.filter((t) => t.kind === "pending");
    expect(pending.map((t) => `${t.sink}/${t.subtaskIndex}#${t.checkpointId}`)).toEqual([
      `orders-file/0#${latest.checkpointId}`,
      `orders-file/1#${latest.checkpointId}`,
    ]);
    expect(pending.every((t) => t.ageMs >= 0 && t.handleBytes > 0)).toBe(true);
    expect(latest.splits.map((s) => [s.splitKey, s.subtask])).toEqual([
      ["orders/generator-0", 0],
      ["orders/generator-1", 1],
      ["orders/generator-2", 0],
      ["orders/generator-3", 1],
    ]);
    // Bounded input read to its end: each split's next index is past the last of its records.
    expect(latest.splits.every((s) => typeof s.position.nextIndex === "number")).toBe(true);
    expect(latest.problem).toBeUndefined();
  });

  it("answers 503 with the reason when the storage cannot be read", async () => {
    const api = createDashboardApi({ storage: sample.storage, jobId: "../escape" });
    const answer = await api.get("/api/checkpoints");
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body).error).toContain("cannot read filesystem:");
  });
});

describe("GET /api/live", () => {
  it("says why there are no live metrics when none are configured", async () => {
    const api = createDashboardApi({ storage: sample.storage, jobId: sample.jobId });
    const live = JSON.parse((await api.get("/api/live")).body) as LiveMetricsView;
    expect(live.available).toBe(false);
    expect(live.reason).toContain("no metrics source");
    expect(live.recordsIn).toBeUndefined();
  });

  it("reads the job's metrics, computes rates between scrapes and notes when failures went up", async () => {
    const scrapes = [metricsText(1000, 400, 0), metricsText(3000, 1400, 2)];
    let call = 0;
    const api = createDashboardApi({
      storage: sample.storage,
      jobId: sample.jobId,
      metricsText: () => scrapes[Math.min(call++, scrapes.length - 1)]!,
    });
    const first = JSON.parse((await api.get("/api/live")).body) as LiveMetricsView;
    expect(first).toMatchObject({
      available: true,
      recordsIn: 1000,
      recordsOut: 400,
      checkpointFailures: 0,
      restarts: 1,
      lastCompletedCheckpointId: 12,
      lastCompletedCheckpointAt: 1_700_000_000_500,
      checkpointDurationMs: { count: 4, sum: 30, mean: 7.5 },
      failureEvents: [],
      problems: [],
    });
    expect(first.recordsInPerSecond).toBeUndefined();
    expect(first.recordsSkipped).toBeUndefined();
    expect(first.sinks).toEqual([
      { sink: "orders-file", subtask: "0", pendingTransactions: 1, oldestPendingAgeSeconds: undefined },
      { sink: "orders-file", subtask: "1", pendingTransactions: 2, oldestPendingAgeSeconds: 0.25 },
    ]);
    expect(first.sources.map((s) => [s.split, s.lagRecords])).toEqual([
      ["generator-0", 10],
      ["generator-2", 40],
    ]);
    const second = JSON.parse((await api.get("/api/live")).body) as LiveMetricsView;
    const seconds = (second.scrapedAt - first.scrapedAt) / 1000;
    if (seconds > 0) expect(second.recordsInPerSecond).toBeCloseTo(2000 / seconds, 6);
    else expect(second.recordsInPerSecond).toBeUndefined();
    expect(second.failureEvents).toEqual([{ at: second.scrapedAt, failures: 2, beforeFirstScrape: false }]);
  });

  it("fetches a metrics URL and reports a failing one as unavailable", async () => {
    let status = 200;
    const server = createServer((_request, response) => {
      response.writeHead(status, { "content-type": "text/plain" });
      response.end(status === 200 ? metricsText(10, 5, 1) : "down");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const api = createDashboardApi({
        storage: sample.storage,
        jobId: sample.jobId,
        metricsUrl: `http://127.0.0.1:${port}/metrics`,
      });
      const live = JSON.parse((await api.get("/api/live")).body) as LiveMetricsView;
      expect(live).toMatchObject({ available: true, recordsIn: 10, checkpointFailures: 1 });
      expect(live.failureEvents).toMatchObject([{ failures: 1, beforeFirstScrape: true }]);
      status = 500;
      const down = JSON.parse((await api.get("/api/live")).body) as LiveMetricsView;
      expect(down.available).toBe(false);
      expect(down.reason).toContain("answered 500");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("an unknown job id", () => {
  it("warns, naming the jobs the storage knows", async () => {
    const api = createDashboardApi({ storage: sample.storage, jobId: "dashbord-sample" });
    const history = JSON.parse((await api.get("/api/checkpoints")).body) as CheckpointHistory;
    expect(history.checkpoints).toEqual([]);
    expect(history.warning).toBe(
      `${sample.storage.description} has no checkpoint, checkpoint history or incarnation of job "dashbord-sample": is the job id right; known jobs: dashboard-sample?`,
    );
  });
});

describe("serveDashboard", () => {
  it("serves the page and the API on 127.0.0.1, read-only", async () => {
    const dashboard = await serveDashboard({ storage: sample.storage, jobId: sample.jobId, port: 0 });
    try {
      expect(dashboard.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const page = await fetch(dashboard.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toContain("text/html");
      const html = await page.text();
      expect(html).toContain("<title>onceflow · dashboard-sample</title>");
      // Self-contained: no external script, style or font.
      expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
      const api = await fetch(new URL("api/checkpoints", dashboard.url));
      expect(api.status).toBe(200);
      expect(((await api.json()) as CheckpointHistory).jobId).toBe(sample.jobId);
      for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
        const refused = await fetch(new URL("api/checkpoints", dashboard.url), { method });
        expect(refused.status).toBe(405);
        expect(refused.headers.get("allow")).toBe("GET, HEAD");
      }
      const head = await fetch(dashboard.url, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect((await fetch(new URL("nothing", dashboard.url))).status).toBe(404);
      // The page names its icon; both the named one and the one browsers ask for unasked are served.
      expect(html).toContain('<link rel="icon" href="favicon.svg" type="image/svg+xml">');
      for (const path of ["favicon.svg", "favicon.ico"]) {
        const icon = await fetch(new URL(path, dashboard.url));
        expect(icon.status).toBe(200);
        expect(icon.headers.get("content-type")).toBe("image/svg+xml");
        expect(await icon.text()).toMatch(/^<svg /);
      }
    } finally {
      await dashboard.close();
    }
    await expect(fetch(dashboard.url)).rejects.toThrow();
  });

  it("refuses a bad port, an unsafe job id and a port in use with CONFIGURATION", async () => {
    const base = { storage: sample.storage, jobId: sample.jobId };
    await expect(serveDashboard({ ...base, port: 70_000 })).rejects.toMatchObject({ code: "CONFIGURATION" });
    await expect(serveDashboard({ ...base, jobId: "../x", port: 0 })).rejects.toMatchObject({
      code: "CONFIGURATION",
    });
    const first = await serveDashboard({ ...base, port: 0 });
    try {
      const port = Number(new URL(first.url).port);
      await expect(serveDashboard({ ...base, port })).rejects.toMatchObject({
        code: "CONFIGURATION",
        message: expect.stringContaining("EADDRINUSE"),
      });
    } finally {
      await first.close();
    }
  });
});
