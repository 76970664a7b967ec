import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isProcessAlive, waitForExit, waitForPidExit } from "../../runtime/processes.js";
import { tcpConnects } from "../../runtime/readiness.js";
import { redisService, redisVersion } from "./redis-service.js";
import { startService } from "./start-service.js";

// The generic service against a real redis-server started as a local process: readiness, a hard
// kill, a start on the same port, and nothing left running afterwards.

async function reachable(host: string, port: number): Promise<boolean> {
  return tcpConnects(host, port, 1_000).then(
    () => true,
    () => false,
  );
}

describe("startService(redisService()) with the local provider", () => {
  it("starts redis-server on a free port, ready; kill() makes it unreachable; start() brings it back on the same port; stop() leaves nothing", async () => {
    const lines: string[] = [];
    const redis = await startService(redisService(), {
      provider: "local",
      writer: (line) => lines.push(line),
    });
    const address = { host: redis.host, port: redis.port };
    const workDir = redis.workDir!;
    try {
      expect(redis.provider).toBe("local");
      expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
      expect(redis.port).not.toBe(6379);
      expect(redis.version).toBe(await redisVersion(address));
      expect(redis.version).toMatch(/^\d+\.\d+\.\d+/);
      expect(existsSync(workDir)).toBe(true);
      const firstPid = redis.pid!;
      expect(isProcessAlive(firstPid)).toBe(true);

      await redis.kill();
      expect(isProcessAlive(firstPid)).toBe(false);
      expect(redis.pid).toBeUndefined();
      expect(await reachable(redis.host, redis.port)).toBe(false);
      await expect(redisVersion(address)).rejects.toThrow();

      await redis.start();
      expect(redis.port).toBe(address.port);
      expect(redis.pid).not.toBe(firstPid);
      expect(isProcessAlive(redis.pid!)).toBe(true);
      expect(await redisVersion(address)).toBe(redis.version);
    } finally {
      const pid = redis.pid;
      await redis.stop();
      if (pid !== undefined) expect(isProcessAlive(pid)).toBe(false);
    }
    expect(existsSync(workDir)).toBe(false);
    expect(await reachable(address.host, address.port)).toBe(false);
    await expect(redis.start()).rejects.toThrow(/was stopped/);
  });

  it("a URL in ONCEFLOW_REDIS_URL is used as is; kill() is refused with a clear error", async () => {
    const own = await startService(redisService(), { provider: "local", writer: () => {} });
    try {
      const named = await startService(redisService(), {
        env: { ONCEFLOW_REDIS_URL: own.url },
        writer: () => {},
      });
      expect(named).toMatchObject({
        provider: "environment",
        url: own.url,
        port: own.port,
        version: own.version,
      });
      await expect(named.kill()).rejects.toThrow(/fault injection needs a provider the testkit controls/);
      await named.stop(); // forgets it only
      expect(isProcessAlive(own.pid!)).toBe(true);
    } finally {
      await own.stop();
    }
  });

  it("a command that exits at once fails with its log, not a timeout", async () => {
    const broken = { ...redisService(), name: "broken-redis" };
    const local = broken.local!;
    const error = await startService(
      {
        ...broken,
        local: { ...local, args: (context) => [...local.args(context), "--no-such-option", "x"] },
      },
      { provider: "local", startTimeoutMs: 60_000, writer: () => {} },
    ).then(
      () => undefined,
      (caught: unknown) => caught as Error,
    );
    expect(error?.message).toContain("did not get ready: the process exited");
    expect(error?.message).toContain("no-such-option");
  });
});

describe("a test process that dies does not leak its service", () => {
  it("when it is SIGKILLed, the reaper kills its redis-server and deletes the folder", async () => {
    const fixture = fileURLToPath(new URL("./fixtures/start-redis-then-die.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", fixture], {
      cwd: fileURLToPath(new URL("../../../../..", import.meta.url)),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const started = await new Promise<{ pid: number; workDir: string; port: number }>((resolve, reject) => {
      let stdout = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk;
        const line = stdout.split("\n").find((each) => each.startsWith("{"));
        if (line !== undefined) resolve(JSON.parse(line) as { pid: number; workDir: string; port: number });
      });
      child.once("close", (code) =>
        reject(new Error(`fixture exited (${code}) before starting:\n${stderr}`)),
      );
    });
    expect(isProcessAlive(started.pid)).toBe(true);
    child.kill("SIGKILL"); // no exit handler runs: only the detached reaper can clean up
    await waitForExit(child, 10_000);
    expect(await waitForPidExit(started.pid, 30_000)).toBe(true);
    await expect.poll(() => existsSync(started.workDir), { timeout: 10_000 }).toBe(false);
    expect(await reachable("127.0.0.1", started.port)).toBe(false);
  });
});
