import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { launchChromium } from "./chromium.js";
import { startDashboardScene } from "./dashboard-scene.js";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe("the dashboard in headless Chromium", () => {
  it("shows a running job's real checkpoints, its failed checkpoint, pending transactions and live metrics", async () => {
    const browser = await launchChromium();
    cleanups.push(() => browser.close());
    // Checkpoint 4's snapshot fails: the job restarts from checkpoint 3 and goes on.
    const scene = await startDashboardScene({ count: 6000, recordsPerSecond: 3000, failCheckpoint: 4 });
    cleanups.push(() => scene.close());
    const page = await browser.context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(scene.dashboard.url);

    const { storage, jobId, result } = await scene.job;
    expect(result.restarts).toBe(1);
    // The default retention keeps 3 checkpoints; the page shows the storage's history of all of them.
    const stored = await storage.list(jobId);
    expect(stored).toHaveLength(3);
    const completed = [1, 2, 3, ...Array.from({ length: result.lastCheckpointId - 4 }, (_, i) => i + 5)];
    expect(completed.length).toBeGreaterThan(3);
    expect(completed.slice(-3)).toEqual(stored.map((m) => m.checkpointId));

    // The page polls every 2 s: wait until it shows every completed checkpoint (the job has ended).
    await expect
      .poll(() => page.locator("#duration-chart circle.checkpoint-point").count(), { timeout: 30_000 })
      .toBe(completed.length);
    const chartIds = await page.$$eval("#duration-chart circle.checkpoint-point", (dots) =>
      dots.map((dot) => Number(dot.getAttribute("data-checkpoint-id"))),
    );
    expect(chartIds).toEqual(completed);
    expect(await page.locator("#size-chart circle.checkpoint-point").count()).toBe(completed.length);
    expect(await page.locator("#history tr.checkpoint-row").count()).toBe(completed.length);
    expect(await page.locator("#t-checkpoints").textContent()).toBe(String(completed.length));

    // Checkpoint 4 failed: marked on both charts with the reason the storage's history recorded.
    const markers = page.locator("#duration-chart g.failure-marker");
    expect(await markers.count()).toBeGreaterThanOrEqual(1);
    expect(
      await page.locator('#duration-chart g.failure-marker[data-kind="missing"] title').first().textContent(),
    ).toMatch(/^checkpoint 4 \(all\) failed: .*sample failure in the snapshot of checkpoint 4/);
    expect(await page.locator("#size-chart g.failure-marker").count()).toBeGreaterThanOrEqual(1);
    // The failure and the restore of checkpoint 3 after it, newest first.
    const events = await page
      .locator("#events tr.event-row")
      .evaluateAll((rows) =>
        rows.map((row) => [...row.querySelectorAll("td")].slice(1, 4).map((cell) => cell.textContent)),
      );
    expect(events).toEqual([
      ["restored", "#3", "all"],
      ["failed", "#4", "all"],
    ]);

    // The final checkpoint's pending transaction of each sink subtask, with its age.
    const pendingRows = page.locator("#transactions tr.transaction-row", { hasText: "pending" });
    expect(await pendingRows.count()).toBe(2);
    const firstRow = await pendingRows.first().locator("td").allTextContents();
    expect(firstRow.slice(0, 4)).toEqual(["orders-file", "0", "pending", `#${result.lastCheckpointId}`]);
    expect(firstRow[5]).toMatch(/\d+(\.\d)? (ms|s|min)$/);

    // Restart: a second incarnation, and a source split row per generator split.
    expect(await page.locator("#incarnations tr.incarnation-row").count()).toBe(2);
    expect(await page.locator("#splits tr.split-row").count()).toBe(4);

    // Live metrics from the job's prom-client registry.
    await expect.poll(() => page.locator("#live.badge.live").count(), { timeout: 30_000 }).toBe(1);
    expect(await page.locator("#t-failures").textContent()).toBe("1");
    expect(await page.locator("#t-restarts").textContent()).toBe("1");
    expect(await page.locator("#t-in").textContent()).not.toBe("–");

    const folder = await mkdtemp(join(tmpdir(), "onceflow-dashboard-shot-"));
    cleanups.push(() => rm(folder, { recursive: true, force: true }));
    const shot = join(folder, "dashboard.png");
    await page.screenshot({ path: shot, fullPage: true });
    const png = await readFile(shot);
    expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
    expect(png.length).toBeGreaterThan(20_000);
    expect(errors).toEqual([]);
  });
});
