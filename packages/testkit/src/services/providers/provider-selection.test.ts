import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OnceflowError } from "@onceflow/core";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { probeKafkaEnvironment } from "../kafka/environment-kafka.js";
import { probeLocalKafka } from "../kafka/local-kafka.js";
import { startPostgres } from "../postgres/start-postgres.js";
import { probeDockerEngine } from "./docker-engine-probe.js";
import {
  chooseProvider,
  decideProvider,
  type ProbeResult,
  type ProviderKind,
  providerOrder,
} from "./provider-selection.js";

function probe(provider: ProviderKind, available: boolean): ProbeResult {
  return {
    provider,
    available,
    detail: `${provider} ${available ? "works" : "is missing"}`,
    remedy: `install ${provider}`,
  };
}

describe("decideProvider", () => {
  it("picks the environment when it names a service, even if everything else works too", () => {
    const decision = decideProvider("Kafka", providerOrder(), [
      probe("environment", true),
      probe("testcontainers", true),
      probe("local", true),
    ]);
    expect(decision).toMatchObject({ ok: true, provider: "environment" });
  });

  it("falls through to local processes when no Docker engine answers", () => {
    const decision = decideProvider("Kafka", providerOrder(), [
      probe("environment", false),
      probe("testcontainers", false),
      probe("local", true),
    ]);
    expect(decision).toMatchObject({ ok: true, provider: "local" });
    expect(decision.tried.map((p) => p.provider)).toEqual(["environment", "testcontainers", "local"]);
  });

  it("prefers testcontainers over local processes when an engine answers", () => {
    const decision = decideProvider("PostgreSQL", providerOrder(), [
      probe("environment", false),
      probe("testcontainers", true),
      probe("local", true),
    ]);
    expect(decision).toMatchObject({ ok: true, provider: "testcontainers" });
  });

  it("fails with a message that lists every provider tried and what to install", () => {
    const decision = decideProvider("PostgreSQL", providerOrder(), [
      probe("environment", false),
      probe("testcontainers", false),
      probe("local", false),
    ]);
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.message).toContain("No PostgreSQL for the tests");
    for (const kind of ["environment", "testcontainers", "local"]) {
      expect(decision.message).toContain(`- ${kind}: ${kind} is missing`);
      expect(decision.message).toContain(`to use it: install ${kind}`);
    }
    expect(decision.message).toContain("never skip");
  });

  it("leaves the environment out when the test needs fault injection", () => {
    expect(providerOrder({ faultInjection: true })).toEqual(["testcontainers", "local"]);
    const decision = decideProvider("Kafka", providerOrder({ faultInjection: true }), [
      probe("environment", true),
      probe("testcontainers", false),
      probe("local", true),
    ]);
    expect(decision).toMatchObject({ ok: true, provider: "local" });
  });

  it("uses only a forced provider", () => {
    expect(providerOrder({ provider: "local" })).toEqual(["local"]);
    const decision = decideProvider(
      "Kafka",
      ["testcontainers"],
      [probe("local", true), probe("testcontainers", false)],
    );
    expect(decision.ok).toBe(false);
  });
});

describe("chooseProvider", () => {
  it("does not probe later providers once one is available", async () => {
    const docker = vi.fn(async () => probe("testcontainers", true));
    const local = vi.fn(async () => probe("local", true));
    const decision = await chooseProvider("Kafka", providerOrder(), {
      environment: async () => probe("environment", true),
      testcontainers: docker,
      local,
    });
    expect(decision).toMatchObject({ ok: true, provider: "environment" });
    expect(docker).not.toHaveBeenCalled();
    expect(local).not.toHaveBeenCalled();
  });

  it("probes in order until one is available", async () => {
    const calls: string[] = [];
    const recorded = (kind: ProviderKind, available: boolean) => async () => {
      calls.push(kind);
      return probe(kind, available);
    };
    const decision = await chooseProvider("Kafka", providerOrder(), {
      environment: recorded("environment", false),
      testcontainers: recorded("testcontainers", false),
      local: recorded("local", true),
    });
    expect(calls).toEqual(["environment", "testcontainers", "local"]);
    expect(decision).toMatchObject({ ok: true, provider: "local" });
  });
});

describe("when nothing can provide the service", () => {
  it("the real probes, with no variable, no Docker engine and no Java, give a failure that says what to install", async () => {
    // An empty PATH hides Java and Maven; an empty cache means the jars would need Maven.
    const env = { PATH: "" };
    const cache = mkdtempSync(join(tmpdir(), "onceflow-empty-cache-"));
    onTestFinished(() => rmSync(cache, { recursive: true, force: true }));
    const probes = [
      probeKafkaEnvironment(env),
      await probeDockerEngine({
        check: () => Promise.reject(new Error("connect ENOENT /var/run/docker.sock")),
      }),
      (await probeLocalKafka("3.9.1", cache, env)).probe,
    ];
    const decision = decideProvider("Kafka", providerOrder(), probes);
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.message).toContain("- environment: ONCEFLOW_KAFKA_BROKERS is not set");
    expect(decision.message).toContain("- testcontainers: no Docker engine answered (connect ENOENT");
    expect(decision.message).toContain("- local: no Java runtime (tried java (ENOENT))");
    expect(decision.message).toContain("set ONCEFLOW_KAFKA_BROKERS=host:port");
    expect(decision.message).toContain("npm i -D testcontainers");
    expect(decision.message).toContain("install Java 11+ and Maven 3.6+");
  });

  it("startPostgres fails (never skips) with an OnceflowError naming the variable to set", async () => {
    const error = await startPostgres({ env: {}, provider: "environment", writer: () => {} }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OnceflowError);
    expect((error as OnceflowError).code).toBe("SERVICE_UNAVAILABLE");
    expect((error as Error).message).toContain("No PostgreSQL for the tests");
    expect((error as Error).message).toContain("set ONCEFLOW_POSTGRES_URL=postgresql://");
  });
});
