import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

// The built CLI (`npm run build -w @onceflow/core`), as a user runs it.
const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const core = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A job needing no services: generated numbers into a FileSink, checkpointed every 200 ms. */
function jobModule(): string {
  return `import { FileSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(core)};
export function createJob(launch) {
  const job = new Job({
    jobId: "metrics-e2e",
    checkpointing: { interval: 200, storage: filesystem("checkpoints") },
    ...launch,
  });
  job
    .fromSource(new GeneratorSource({ generate: (index) => index, recordsPerSecond: 2000 }), { uid: "numbers" })
    .map((value) => value * 2)
    .sinkTo(new FileSink({ directory: "output" }), { uid: "out" });
  return job;
}
`;
}

function start(
  cwd: string,
  args: string[],
): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [cli, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exit;
  });
  return { child, output: () => output, exit };
}

async function eventually<T>(
  what: string,
  attempt: () => Promise<T | undefined>,
  output: () => string,
): Promise<T> {
  // Bounded by the test's timeout; each round waits a little so the job can move on.
  for (let round = 0; ; round++) {
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    if (round > 600) throw new Error(`${what} never happened; the CLI printed:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The value of the sample `name{labels}` in Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((each) => each.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("onceflow run --metrics-port (built CLI, a real child process)", () => {
  it("serves /metrics, /healthz and /readyz while the job runs, and exits 0 on SIGTERM", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-run-endpoints-"));
    cleanups.push(() => rm(cwd, { recursive: true, force: true }));
    await writeFile(join(cwd, "job.mjs"), jobModule());
    const run = start(cwd, ["run", "job.mjs", "--metrics-port", "0", "--ui-port", "0"]);

    const base = await eventually(
      "the endpoints' address on stdout",
      async () => /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(run.output())?.[1],
      run.output,
    );
    const labels = 'job="metrics-e2e",subtask="0"';
    const text = await eventually(
      "three completed checkpoints and counted records",
      async () => {
        const response = await fetch(`${base}/metrics`);
        const body = await response.text();
        const checkpoint = sample(body, 'onceflow_last_completed_checkpoint_id{job="metrics-e2e"}') ?? 0;
        const read = sample(body, `onceflow_records_in_total{${labels},operator="numbers"}`) ?? 0;
        return checkpoint >= 3 && read > 0 ? body : undefined;
      },
      run.output,
    );
    expect(sample(text, `onceflow_records_out_total{${labels},operator="out"}`)).toBeGreaterThan(0);
    expect(
      sample(text, 'onceflow_checkpoint_duration_seconds_count{job="metrics-e2e"}'),
    ).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'onceflow_checkpoint_size_bytes_count{job="metrics-e2e"}')).toBeGreaterThanOrEqual(3);
    const completedAt = sample(
      text,
      'onceflow_last_completed_checkpoint_timestamp_seconds{job="metrics-e2e"}',
    );
    expect(completedAt).toBeGreaterThan(Date.now() / 1000 - 3600);
    expect(sample(text, `onceflow_sink_pending_transactions{${labels},sink="out"}`)).toBeGreaterThanOrEqual(
      0,
    );
    expect(
      sample(text, `onceflow_sink_oldest_pending_transaction_age_seconds{${labels},sink="out"}`),
    ).toBeGreaterThanOrEqual(0);
    expect(
      sample(text, `onceflow_sink_commit_duration_seconds_count{${labels},sink="out"}`),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, `onceflow_restarts_total{job="metrics-e2e"}`)).toBe(0);
    expect(sample(text, `onceflow_checkpoint_failures_total{job="metrics-e2e"}`)).toBe(0);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", state: "running" });
    const ready = await eventually(
      "/readyz answering 200",
      async () => {
        const response = await fetch(`${base}/readyz`);
        return response.status === 200 ? ((await response.json()) as Record<string, unknown>) : undefined;
      },
      run.output,
    );
    expect(ready).toMatchObject({
      status: "ok",
      state: "running",
      lastCompletedCheckpoint: { id: expect.any(Number) },
    });
    expect((await fetch(`${base}/nothing`)).status).toBe(404);
    // --ui-port: the checkpoint dashboard beside the job, on 127.0.0.1 too.
    const ui = /dashboard on (http:\/\/127\.0\.0\.1:\d+)/.exec(run.output())?.[1];
    expect(ui).toBeDefined();
    expect((await fetch(`${ui}/`)).status).toBe(200);

    run.child.kill("SIGTERM");
    expect(await run.exit).toBe(0);
    expect(run.output()).toMatch(/job finished: \{"jobId":"metrics-e2e","endedBy":"stop"/);
  });

  it("answers /readyz with 503 and the reason when checkpoints are older than the limit", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-run-endpoints-"));
    cleanups.push(() => rm(cwd, { recursive: true, force: true }));
    await writeFile(join(cwd, "job.mjs"), jobModule());
    // A limit of 1 ms: almost every look finds the last checkpoint older than that.
    const run = start(cwd, ["run", "job.mjs", "--metrics-port", "0", "--ready-max-checkpoint-age", "1"]);
    const base = await eventually(
      "the endpoints' address on stdout",
      async () => /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(run.output())?.[1],
      run.output,
    );
    const unready = await eventually(
      "/readyz answering 503 while running",
      async () => {
        const response = await fetch(`${base}/readyz`);
        const body = (await response.json()) as { state: string; reason: string };
        return response.status === 503 && body.state === "running" ? body : undefined;
      },
      run.output,
    );
    expect(unready).toMatchObject({
      status: "unavailable",
      reason: expect.stringMatching(/^no checkpoint completed for/),
    });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exit).toBe(0);
  });
});
