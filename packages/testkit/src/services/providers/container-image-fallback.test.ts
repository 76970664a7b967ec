import { describe, expect, it } from "vitest";
import { startPostgres } from "../postgres/start-postgres.js";
import { probeDockerEngine } from "./docker-engine-probe.js";

// An image no engine has and no registry serves. With an engine running (CI's container run), the
// testcontainers provider must turn it down at the probe and name it; without one, the engine probe
// turns it down. Either way an unpinned start ends at the local provider instead of failing.
const MISSING = "onceflow-testkit-missing/postgres:0";

describe("a Docker engine that cannot get the image", () => {
  it("falls back to local processes when no provider is pinned", async () => {
    const lines: string[] = [];
    const pg = await startPostgres({
      faultInjection: true,
      image: MISSING,
      env: { ...process.env, ONCEFLOW_TESTKIT_PROVIDER: "" },
      writer: (line) => lines.push(line),
    });
    try {
      expect(pg.provider).toBe("local");
    } finally {
      await pg.stop();
    }
  });

  it("names the image and the variable when testcontainers is pinned", async () => {
    const engine = await probeDockerEngine({ timeoutMs: 20_000 });
    const failure = await startPostgres({
      faultInjection: true,
      provider: "testcontainers",
      env: { ...process.env, ONCEFLOW_POSTGRES_IMAGE: MISSING },
    }).then(
      async (pg) => {
        await pg.stop();
        return undefined;
      },
      (error: unknown) => error as Error & { code?: string },
    );
    expect(failure?.code).toBe("SERVICE_UNAVAILABLE");
    if (engine.available) {
      expect(failure?.message).toContain(MISSING);
      expect(failure?.message).toContain("ONCEFLOW_POSTGRES_IMAGE");
    } else {
      expect(failure?.message).toContain("no Docker engine answered");
    }
  });
});
