import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { probeDockerEngine } from "./docker-engine-probe.js";

// An independent answer to "does a Docker engine answer here?": GET /_ping on the engine's socket
// (or DOCKER_HOST when it is tcp://), with a short timeout.
function engineAnswersPing(): Promise<boolean> {
  const dockerHost = process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock";
  const target = dockerHost.startsWith("unix://")
    ? { socketPath: dockerHost.slice("unix://".length) }
    : {
        host: new URL(dockerHost.replace(/^tcp:/, "http:")).hostname,
        port: Number(new URL(dockerHost.replace(/^tcp:/, "http:")).port),
      };
  return new Promise((resolve) => {
    const req = request({ ...target, path: "/_ping", timeout: 3_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

describe("probeDockerEngine", () => {
  it("agrees with a direct ping of the engine on this machine, without hanging", async () => {
    const started = Date.now();
    const [probe, answers] = await Promise.all([
      probeDockerEngine({ timeoutMs: 20_000 }),
      engineAnswersPing(),
    ]);
    expect(Date.now() - started).toBeLessThan(25_000);
    expect(probe.provider).toBe("testcontainers");
    expect(probe.available).toBe(answers);
    if (!answers) {
      expect(probe.detail).toMatch(/^no Docker engine answered \(/);
      expect(probe.remedy).toContain("start a Docker engine");
    }
  }, 30_000);

  it("reports unavailable when the engine does not answer within the timeout", async () => {
    const started = Date.now();
    const probe = await probeDockerEngine({ timeoutMs: 300, check: () => new Promise<string>(() => {}) });
    expect(probe.available).toBe(false);
    expect(probe.detail).toContain("no answer within 300 ms");
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("reports available when the check answers", async () => {
    const probe = await probeDockerEngine({ check: async () => "engine at localhost" });
    expect(probe).toMatchObject({
      provider: "testcontainers",
      available: true,
      detail: "engine at localhost",
    });
  });
});
