import { ConfigurationError, OnceflowError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { importOptionalModule } from "../../runtime/optional-module.js";
import { chooseProvider, type ProbeResult, providerOrder } from "../providers/provider-selection.js";
import { redisService } from "./redis-service.js";
import { resolveServiceDefinition, type ServiceDefinition, serviceVariable } from "./service-definition.js";
import { addressOfUrl, probeServiceCommand, probeServiceEnvironment } from "./service-probes.js";
import { serviceProbes, startService } from "./start-service.js";

const url = ({ host, port }: { host: string; port: number }) => `thing://${host}:${port}`;

function engine(available: boolean): () => Promise<ProbeResult> {
  return async () => ({
    provider: "testcontainers",
    available,
    detail: available ? "engine at localhost (Linux, server 27.0)" : "no Docker engine answered (ENOENT)",
    remedy: "start a Docker engine",
  });
}

function configurationError(run: () => unknown): ConfigurationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return error as ConfigurationError;
  }
  throw new Error("expected a ConfigurationError");
}

describe("resolveServiceDefinition", () => {
  it("fills in the variable, the shared marker, the display name and a TCP readiness check", () => {
    const resolved = resolveServiceDefinition({
      name: "my-store",
      url,
      local: { command: "my-store", args: ({ port }) => ["-p", String(port)], install: "make install" },
    });
    expect(resolved.environmentVariable).toBe("ONCEFLOW_MY_STORE_URL");
    expect(resolved.sharedMarker).toBe("ONCEFLOW_TESTKIT_SHARED_MY_STORE_URL");
    expect(resolved.displayName).toBe("my-store");
    expect(typeof resolved.ready).toBe("function");
    expect(serviceVariable("redis")).toBe("ONCEFLOW_REDIS_URL");
  });

  it("keeps a variable the definition names", () => {
    const resolved = resolveServiceDefinition({ ...redisService(), environmentVariable: "REDIS_URL" });
    expect(resolved.environmentVariable).toBe("REDIS_URL");
  });

  it("refuses definitions that cannot work, naming the field to change", () => {
    const base: ServiceDefinition = { name: "thing", url, container: { image: "thing:1", port: 1234 } };
    expect(configurationError(() => resolveServiceDefinition({ ...base, name: "My Thing" })).setting).toBe(
      "definition.name",
    );
    expect(configurationError(() => resolveServiceDefinition({ name: "thing", url })).message).toContain(
      "give a container (image and port), a local command, or both",
    );
    expect(
      configurationError(() =>
        resolveServiceDefinition({ ...base, container: { image: "thing:1", port: 0 } }),
      ).setting,
    ).toBe("definition.container.port");
    expect(
      configurationError(() =>
        resolveServiceDefinition({
          ...base,
          local: { command: "", args: () => [], install: "" },
        }),
      ).setting,
    ).toBe("definition.local.command");
    expect(
      configurationError(() => resolveServiceDefinition({ ...base, environmentVariable: "NOT A NAME" }))
        .setting,
    ).toBe("definition.environmentVariable");
  });

  it("startService checks the definition before probing anything", async () => {
    await expect(startService({ name: "", url, local: redisService().local })).rejects.toBeInstanceOf(
      ConfigurationError,
    );
  });
});

describe("addressOfUrl", () => {
  it("reads host and port, with the default port when the URL has none", () => {
    expect(addressOfUrl("redis://127.0.0.1:6380/0", 6379)).toEqual({ host: "127.0.0.1", port: 6380 });
    expect(addressOfUrl("redis://user:secret@cache.internal", 6379)).toEqual({
      host: "cache.internal",
      port: 6379,
    });
    expect(addressOfUrl("redis://[::1]:7000")).toEqual({ host: "::1", port: 7000 });
  });

  it("says what is wrong otherwise", () => {
    expect(addressOfUrl("127.0.0.1:6379")).toHaveProperty("problem");
    expect(addressOfUrl("redis://cache.internal")).toEqual({
      problem: '"redis://cache.internal" names no port (and the definition has no defaultPort)',
    });
  });
});

describe("the provider chain for a definition", () => {
  const redis = resolveServiceDefinition(redisService());
  const noCommand = { ...redis, local: { ...redis.local!, command: "onceflow-no-such-command" } };

  it("uses ONCEFLOW_<NAME>_URL first, even when Docker and the command are there", async () => {
    const decision = await chooseProvider(
      "Redis",
      providerOrder(),
      serviceProbes(redis, { ONCEFLOW_REDIS_URL: "redis://cache:6379" }, engine(true)),
    );
    expect(decision).toMatchObject({ ok: true, provider: "environment" });
  });

  it("ignores a variable that the testkit's global setup exported for the run's shared service", () => {
    const env = {
      ONCEFLOW_REDIS_URL: "redis://127.0.0.1:4000",
      ONCEFLOW_TESTKIT_SHARED_REDIS_URL: "redis://127.0.0.1:4000",
    };
    expect(probeServiceEnvironment(redis, env).available).toBe(false);
    expect(
      probeServiceEnvironment(redis, { ...env, ONCEFLOW_REDIS_URL: "redis://other:6379" }).available,
    ).toBe(true);
  });

  it("takes the container where a Docker engine answers, naming the image", async () => {
    const decision = await chooseProvider("Redis", providerOrder(), serviceProbes(redis, {}, engine(true)));
    expect(decision).toMatchObject({ ok: true, provider: "testcontainers" });
    if (decision.ok)
      expect(decision.probe.detail).toBe("redis:7 on the engine at localhost (Linux, server 27.0)");
  });

  it("falls through to the local command when no engine answers", async () => {
    const decision = await chooseProvider("Redis", providerOrder(), serviceProbes(redis, {}, engine(false)));
    expect(decision).toMatchObject({ ok: true, provider: "local" });
    expect(decision.tried.map((probe) => probe.provider)).toEqual(["environment", "testcontainers", "local"]);
  });

  it("does not ask the engine for a definition without a container", async () => {
    let asked = false;
    const localOnly = resolveServiceDefinition({ ...redisService(), container: undefined });
    const decision = await chooseProvider(
      "Redis",
      providerOrder(),
      serviceProbes(localOnly, {}, async () => {
        asked = true;
        return engine(true)();
      }),
    );
    expect(asked).toBe(false);
    expect(decision).toMatchObject({ ok: true, provider: "local" });
    expect(decision.tried[1]?.detail).toBe("the Redis definition has no container image");
  });

  it("leaves the variable out for fault injection", async () => {
    const decision = await chooseProvider(
      "Redis",
      providerOrder({ faultInjection: true }),
      serviceProbes(redis, { ONCEFLOW_REDIS_URL: "redis://cache:6379" }, engine(false)),
    );
    expect(decision).toMatchObject({ ok: true, provider: "local" });
  });

  it("when nothing works, the message lists every provider and what to install", async () => {
    const decision = await chooseProvider(
      "Redis",
      providerOrder(),
      serviceProbes(noCommand, {}, engine(false)),
    );
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.message).toContain("No Redis for the tests");
    expect(decision.message).toContain("- environment: ONCEFLOW_REDIS_URL is not set");
    expect(decision.message).toContain("set ONCEFLOW_REDIS_URL=redis://host:6379 to a running Redis");
    expect(decision.message).toContain("- local: onceflow-no-such-command was not found (ENOENT)");
    expect(decision.message).toContain("apt-get install redis-server");
  });

  it("the local probe reads the command's version line", async () => {
    const probe = await probeServiceCommand(redis);
    expect(probe.available).toBe(true);
    expect(probe.detail).toMatch(/^redis-server: Redis server v=\d+\.\d+/);
  });

  it("startService fails (never skips) with SERVICE_UNAVAILABLE naming the variable to set", async () => {
    const error = await startService(redisService(), {
      provider: "environment",
      env: {},
      writer: () => {},
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OnceflowError);
    expect((error as OnceflowError).code).toBe("SERVICE_UNAVAILABLE");
    expect((error as Error).message).toContain("set ONCEFLOW_REDIS_URL=redis://");
  });

  it("a named service that does not answer is an error, not a reason to start another", async () => {
    const error = await startService(redisService(), {
      env: { ONCEFLOW_REDIS_URL: "redis://127.0.0.1:1" },
      startTimeoutMs: 500,
      writer: () => {},
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect((error as OnceflowError).code).toBe("SERVICE_UNAVAILABLE");
    expect((error as Error).message).toContain(
      "ONCEFLOW_REDIS_URL names a Redis at 127.0.0.1:1 that is not ready",
    );
  });
});

describe("optional client libraries", () => {
  it("a missing one is a CONFIGURATION error naming the package and how to install it", async () => {
    const error = await importOptionalModule(
      "onceflow-not-installed",
      // A computed specifier: the bundler must not try to resolve it.
      () => import(["onceflow", "not", "installed"].join("-")),
      { neededBy: "startSomething()", install: "npm i -D onceflow-not-installed" },
    ).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OnceflowError);
    expect((error as OnceflowError).code).toBe("CONFIGURATION");
    expect((error as Error).message).toContain('needs the package "onceflow-not-installed"');
    expect((error as Error).message).toContain("npm i -D onceflow-not-installed");
  });

  it("other failures of an installed package are not disguised", async () => {
    const boom = new Error("syntax error in the package");
    await expect(
      importOptionalModule("kafkajs", () => Promise.reject(boom), { neededBy: "x", install: "y" }),
    ).rejects.toBe(boom);
  });
});
