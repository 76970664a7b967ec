import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

// The Grafana dashboard of this folder: valid JSON, and every metric its queries name is served by
// a live job (metrics-job.mjs under the built `onceflow run --metrics-port`).
const here = fileURLToPath(new URL(".", import.meta.url));
const cli = fileURLToPath(new URL("../../packages/core/dist/cli.js", import.meta.url));

interface Panel {
  readonly type: string;
  readonly title: string;
  readonly targets?: ReadonlyArray<{ readonly expr: string }>;
}
interface Dashboard {
  readonly title: string;
  readonly panels: readonly Panel[];
  readonly templating: {
    readonly list: ReadonlyArray<{ readonly name: string; readonly definition: string }>;
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Metric names in a PromQL expression: identifiers of onceflow's, the process's and Node's families. */
function metricNames(expression: string): string[] {
  return [...expression.matchAll(/\b((?:onceflow|process|nodejs)_[a-z0-9_]+)/g)].map(
    (match) => match[1] ?? "",
  );
}

/** Starts the sample job with /metrics on a free port; resolves with the address. */
async function liveJob(): Promise<string> {
  const cwd = await mkdtemp(join(tmpdir(), "onceflow-grafana-"));
  const child: ChildProcess = spawn(
    process.execPath,
    [cli, "run", join(here, "metrics-job.mjs"), "--metrics-port", "0", "--log-level", "warn"],
    { cwd, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    child.kill("SIGTERM");
    await exited;
    await rm(cwd, { recursive: true, force: true });
  });
  for (let round = 0; round < 600; round++) {
    const url = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(output)?.[1];
    if (url !== undefined) return url;
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the job printed no metrics address:\n${output}`);
}

/** The scrape once the job completed two checkpoints (every metric has been reported by then). */
async function scrapeAfterCheckpoints(url: string): Promise<string> {
  for (let round = 0; round < 600; round++) {
    const text = await (await fetch(url)).text();
    const checkpoint = /^onceflow_last_completed_checkpoint_id\{[^}]*\} (\d+)$/m.exec(text)?.[1];
    if (Number(checkpoint ?? 0) >= 2) return text;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("no second checkpoint completed");
}

describe("examples/grafana/onceflow-dashboard.json", () => {
  it("is a dashboard whose every query names metrics that a live job serves", async () => {
    const dashboard = JSON.parse(await readFile(join(here, "onceflow-dashboard.json"), "utf8")) as Dashboard;
    expect(dashboard.title).toBe("onceflow");
    const queries = [
      ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
      ...dashboard.templating.list.map((variable) => variable.definition),
    ];
    expect(
      dashboard.panels
        .filter((panel) => panel.type !== "row")
        .every((panel) => (panel.targets ?? []).length > 0),
    ).toBe(true);
    const used = [...new Set(queries.flatMap(metricNames))].sort();
    expect(used.length).toBeGreaterThan(15);

    const text = await scrapeAfterCheckpoints(await liveJob());
    const served = new Set([...text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/gm)].map((match) => match[1]));
    expect(used.filter((name) => !served.has(name))).toEqual([]);
  });
});
