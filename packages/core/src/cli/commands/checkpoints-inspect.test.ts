import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runSampleJob, type SampleJob } from "../../dashboard/testing/run-sample-job.js";
import { runCli } from "../program.js";

let root: string;
let sample: SampleJob;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "onceflow-inspect-"));
  sample = await runSampleJob({ root, count: 300, recordsPerSecond: 3000 });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io = { stdout: (t: string) => (stdout += t), stderr: (t: string) => (stderr += t), cwd: root };
  const code = await runCli(args, { io });
  return { code, stdout, stderr };
}

describe("onceflow checkpoints inspect: sink transactions", () => {
  it("shows each sink's transactions of the checkpoint with their checkpoint id and handle", async () => {
    const id = sample.result.lastCheckpointId;
    const run = await cli(["checkpoints", "inspect", "checkpoints", "--job", sample.jobId]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const section = run.stdout.split("  sink transactions:\n")[1]?.split("  summary:")[0] ?? "";
    const rows = section
      .trimEnd()
      .split("\n")
      .map((line) => line.trim().split(/\s{2,}/));
    expect(rows[0]).toEqual(["SINK", "SUBTASK", "KIND", "CHECKPOINT", "STARTED AT", "HANDLE", "DESCRIPTION"]);
    const pending = rows.filter((row) => row[2] === "pending");
    expect(pending.map((row) => [row[0], row[1], row[3]])).toEqual([
      ["orders-file", "0", String(id)],
      ["orders-file", "1", String(id)],
    ]);
    for (const row of pending) {
      expect(row[5]).toMatch(/^\d+(\.\d+)? (B|KiB)$/);
      expect(row[6]).toContain('"stagingFile"');
    }
  });

  it("puts them in the JSON too", async () => {
    const run = await cli(["checkpoints", "inspect", "checkpoints", "1", "--job", sample.jobId, "--json"]);
    expect(run.code).toBe(0);
    const [report] = JSON.parse(run.stdout) as Array<{ sinkTransactions: Array<Record<string, unknown>> }>;
    const pending = report!.sinkTransactions.filter((t) => t.kind === "pending");
    expect(pending.map((t) => [t.sink, t.subtaskIndex, t.checkpointId])).toEqual([
      ["orders-file", 0, 1],
      ["orders-file", 1, 1],
    ]);
    expect(pending.every((t) => typeof t.handleBytes === "number" && (t.handleBytes as number) > 0)).toBe(
      true,
    );
  });
});
