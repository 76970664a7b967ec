// Renders the README's dashboard screenshot (packages/core/docs/dashboard.png) from a real job in
// Debian's headless Chromium: `npm run dashboard:screenshot`.
import { fileURLToPath } from "node:url";
import { launchChromium } from "../test/dashboard/chromium.js";
import { startDashboardScene } from "../test/dashboard/dashboard-scene.js";

const output = fileURLToPath(new URL("../docs/dashboard.png", import.meta.url));
const browser = await launchChromium({ width: 1400, height: 900 });
// Long enough for the records-per-second chart to fill; checkpoint 130 fails and the job restarts
// (late enough for the failure and the restore to be among the 100 entries the history keeps).
const scene = await startDashboardScene({ count: 36_000, recordsPerSecond: 2_000, failCheckpoint: 130 });
try {
  const page = await browser.context.newPage();
  await page.goto(scene.dashboard.url);
  const { storage, jobId } = await scene.job;
  // With the default retention of 3: the other points come from the storage's checkpoint history.
  const stored = (await storage.readHistory(jobId)).filter((entry) => entry.kind === "completed").length;
  // The page polls every 2 s: wait until it shows every completed checkpoint.
  const deadline = Date.now() + 30_000;
  while ((await page.locator("#duration-chart circle.checkpoint-point").count()) !== stored) {
    if (Date.now() > deadline) throw new Error(`the page does not show the ${stored} checkpoints`);
    await page.waitForTimeout(250);
  }
  await page.screenshot({ path: output, fullPage: true });
  console.log(`wrote ${output} (${stored} checkpoints)`);
} finally {
  await scene.close();
  await browser.close();
}
