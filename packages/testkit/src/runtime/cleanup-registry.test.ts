import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isProcessAlive, waitForExit, waitForPidExit } from "./processes.js";

const fixture = fileURLToPath(new URL("./fixtures/start-postgres-then-die.ts", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../../..", import.meta.url));

/** Runs the fixture in its own Node process; resolves once it printed where its server is. */
function startServerInChild(mode: "exit" | "wait") {
  const child = spawn(process.execPath, ["--import", "tsx", fixture, mode], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const started = new Promise<{ pid: number; workDir: string }>((resolve, reject) => {
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const line = stdout.split("\n").find((l) => l.startsWith("{"));
      if (line !== undefined) resolve(JSON.parse(line) as { pid: number; workDir: string });
    });
    child.once("close", (code) => reject(new Error(`fixture exited (${code}) before starting:\n${stderr}`)));
  });
  return { child, started };
}

describe("a crashed test process does not leak its services", () => {
  it("when it is SIGKILLed, the reaper stops its PostgreSQL and deletes the folder", async () => {
    const { child, started } = startServerInChild("wait");
    const { pid, workDir } = await started;
    expect(isProcessAlive(pid)).toBe(true);
    child.kill("SIGKILL"); // no exit handler runs: only the detached reaper can clean up
    await waitForExit(child, 10_000);
    expect(await waitForPidExit(pid, 30_000)).toBe(true);
    await expect.poll(() => existsSync(workDir), { timeout: 10_000 }).toBe(false);
  });

  it("when it exits without stopping it, the exit hook stops its PostgreSQL", async () => {
    const { child, started } = startServerInChild("exit");
    const { pid, workDir } = await started;
    await waitForExit(child, 60_000);
    // The exit hook ran synchronously before the process ended: nothing is left right away.
    expect(isProcessAlive(pid)).toBe(false);
    expect(existsSync(workDir)).toBe(false);
  });
});
