import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CheckpointHistory } from "../../dashboard/checkpoint-history.js";
import { runSampleJob, type SampleJob } from "../../dashboard/testing/run-sample-job.js";
import { addUiCommand, type UiCommandOptions } from "./ui.js";

let root: string;
let sample: SampleJob;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "onceflow-ui-"));
  sample = await runSampleJob({ root, count: 300, recordsPerSecond: 3000 });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function ui(
  args: string[],
  options: UiCommandOptions = {},
): Promise<{ stdout: string; stderr: string; error?: unknown }> {
  let stdout = "";
  let stderr = "";
  const io = {
    stdout: (text: string) => (stdout += text),
    stderr: (text: string) => (stderr += text),
    cwd: root,
  };
  const program = new Command("onceflow").exitOverride().configureOutput({ writeErr: () => undefined });
  addUiCommand(program, io, options);
  try {
    await program.parseAsync(["ui", ...args], { from: "user" });
    return { stdout, stderr };
  } catch (error) {
    return { stdout, stderr, error };
  }
}

describe("onceflow ui", () => {
  it("serves the job's dashboard from a checkpoint folder until it is stopped", async () => {
    let served: CheckpointHistory | undefined;
    let url = "";
    const run = await ui(["checkpoints", "--job", sample.jobId, "--port", "0"], {
      untilStopped: async (at) => {
        url = at;
        served = (await (await fetch(new URL("api/checkpoints", at))).json()) as CheckpointHistory;
      },
    });
    expect(run.error).toBeUndefined();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(run.stdout).toBe(`dashboard of job ${sample.jobId} (${sample.storage.description}) at ${url}\n`);
    expect(run.stderr).toBe("");
    // Every completed checkpoint the storage's history holds, not only the retained ones.
    const completed = (await sample.storage.readHistory(sample.jobId)).filter((e) => e.kind === "completed");
    expect(served?.checkpoints.map((c) => c.checkpointId)).toEqual(completed.map((e) => e.checkpointId));
    // Closed once stopped.
    await expect(fetch(url)).rejects.toThrow();
  });

  it("warns on a job id the storage does not know, and serves the page anyway", async () => {
    const run = await ui(["checkpoints", "--job", "dashbord-sample", "--port", "0"], {
      untilStopped: async () => undefined,
    });
    expect(run.error).toBeUndefined();
    expect(run.stderr).toBe(
      `warning: ${sample.storage.description} has no checkpoint, checkpoint history or incarnation of job "dashbord-sample": is the job id right; known jobs: ${sample.jobId}?\n`,
    );
  });

  it("explains what is missing or wrong", async () => {
    const never: UiCommandOptions = { untilStopped: () => Promise.reject(new Error("must not serve")) };
    const cases: Array<[string[], string]> = [
      [["--job", "x", "--port", "0"], "<dir>: give the checkpoint folder"],
      [["nowhere", "--job", "x", "--port", "0"], "is not a folder"],
      [["checkpoints", "--job", "x", "--port", "http"], "--port: a port is a whole number"],
      [
        ["checkpoints", "--job", "x", "--port", "0", "--metrics-url", "ftp://x"],
        "--metrics-url: give the job's",
      ],
      [
        ["checkpoints", "--job", "x", "--postgres", "postgresql://localhost/db"],
        "either a storage folder or --postgres",
      ],
    ];
    for (const [args, message] of cases) {
      const run = await ui(args, never);
      expect(run.error, args.join(" ")).toMatchObject({
        code: "CONFIGURATION",
        message: expect.stringContaining(message),
      });
    }
    const noJob = await ui(["checkpoints"], never);
    expect(String(noJob.error)).toContain("--job <id>");
  });
});
