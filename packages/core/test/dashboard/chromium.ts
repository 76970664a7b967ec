import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/** Debian's Chromium: what the dashboard's browser test and screenshot run in (no download). */
export const CHROMIUM_PATH = process.env.ONCEFLOW_CHROMIUM ?? "/usr/bin/chromium";

// Without the background-networking flags Chromium keeps calling Google's hosts, which a closed
// network refuses; a fresh profile per run keeps runs independent.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless Chromium with a fresh profile; `close` also removes the profile. */
export interface HeadlessChromium {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Starts Debian's headless Chromium through playwright-core. Fails — never skips — when it is not
 * installed, saying how to install it.
 */
export async function launchChromium(viewport = { width: 1400, height: 1000 }): Promise<HeadlessChromium> {
  try {
    await access(CHROMIUM_PATH);
  } catch {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}: the dashboard's browser test needs it (apt-get install chromium), or set ONCEFLOW_CHROMIUM to its path`,
    );
  }
  const profile = await mkdtemp(join(tmpdir(), "onceflow-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ARGS,
    viewport,
  });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
