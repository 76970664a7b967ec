import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
import { FileSink, GeneratorSource, Job } from "@onceflow/core";
import { afterAll, describe, expect, it } from "vitest";
import {
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "../../packages/connector-postgres/test/helpers/postgres.js";

// The built executable, as users run it (`npm test` builds every package first).
const cli = fileURLToPath(new URL("../../packages/core/dist/cli.js", import.meta.url));
const url = preparedPostgresUrl();
const table = uniqueName("dashboard");
const folders: string[] = [];
afterAll(async () => {
  for (const suffix of ["_state", "_owner", ""]) await sql(url, `DROP TABLE IF EXISTS ${table}${suffix}`);
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

describe("onceflow ui --postgres", () => {
  it("serves the checkpoints a job stored in PostgreSQL, and stops on SIGTERM", async () => {
    const out = await mkdtemp(join(tmpdir(), "onceflow-ui-pg-"));
    folders.push(out);
    const storage = new PostgresCheckpointStorage({ connection: url, table });
    const job = new Job({ jobId: "pg-dashboard", checkpointing: { interval: 50, retained: 100, storage } });
    job
      .fromSource(
        new GeneratorSource({ count: 600, splits: 2, recordsPerSecond: 2000, generate: (i) => i }),
        { uid: "numbers" },
      )
      .sinkTo(() => new FileSink<number>({ directory: out }), { uid: "numbers-file" });
    const result = await job.execute();
    const stored = await storage.list("pg-dashboard");
    await storage.close();
    expect(stored.length).toBeGreaterThan(1);

    const child = spawn(
      process.execPath,
      [cli, "ui", "--postgres", url, "--postgres-table", table, "--job", "pg-dashboard", "--port", "0"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const dashboardUrl = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        const found = / at (http:\/\/127\.0\.0\.1:\d+\/)\n/.exec(stdout);
        if (found !== null) resolve(found[1]!);
      });
      exited.then((code) => reject(new Error(`onceflow ui exited with ${code}: ${stderr}`)));
    });
    try {
      expect(stdout).toContain("dashboard of job pg-dashboard (postgres:");
      const history = (await (await fetch(new URL("api/checkpoints", dashboardUrl))).json()) as {
        checkpoints: Array<{ checkpointId: number }>;
        latest: Array<{ checkpointId: number; transactions: Array<{ sink: string; kind: string }> }>;
      };
      expect(history.checkpoints.map((c) => c.checkpointId)).toEqual(stored.map((m) => m.checkpointId));
      expect(history.latest[0]?.checkpointId).toBe(result.lastCheckpointId);
      expect(history.latest[0]?.transactions.filter((t) => t.kind === "pending").map((t) => t.sink)).toEqual([
        "numbers-file",
      ]);
      expect((await fetch(dashboardUrl, { method: "POST" })).status).toBe(405);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(stderr).toBe("");
  });
});
