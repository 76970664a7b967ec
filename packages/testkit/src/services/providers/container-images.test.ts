import { describe, expect, it } from "vitest";
import {
  containerProbe,
  type ImageAccess,
  imageVariable,
  probeContainerImages,
  providerFromEnvironment,
  resolveImage,
} from "./container-images.js";
import { chooseProvider, type ProbeResult, providerOrder } from "./provider-selection.js";

const engine = async (): Promise<ProbeResult> => ({
  provider: "testcontainers",
  available: true,
  detail: "engine at localhost (test, server 0)",
  remedy: "start a Docker engine",
});

/** An engine that has `present` and can pull `pullable`; pulls of anything else fail (or hang). */
function fakeEngine(options: { present?: string[]; pullable?: string[]; hang?: boolean }): ImageAccess & {
  pulls: string[];
} {
  const have = new Set(options.present ?? []);
  const pulls: string[] = [];
  return {
    pulls,
    exists: async (image) => have.has(image),
    pull: (image) => {
      pulls.push(image);
      if (options.hang === true) return new Promise<void>(() => {});
      if (options.pullable?.includes(image) === true) {
        have.add(image);
        return Promise.resolve();
      }
      return Promise.reject(new Error(`Get "https://registry-1.docker.io/v2/": no such host`));
    },
  };
}

const REAPER = "testcontainers/ryuk:0.14.0";

describe("resolveImage", () => {
  it("takes the option, then ONCEFLOW_<NAME>_IMAGE, then the default, with {version} filled in", () => {
    const env = { ONCEFLOW_KAFKA_IMAGE: "mirror.local/kafka:{version}" };
    expect(resolveImage("kafka", { env, fallback: "apache/kafka:3.9.1", version: "3.9.1" })).toBe(
      "mirror.local/kafka:3.9.1",
    );
    expect(
      resolveImage("kafka", {
        option: "mine/kafka:x",
        env,
        fallback: "apache/kafka:4.1.1",
        version: "4.1.1",
      }),
    ).toBe("mine/kafka:x");
    expect(resolveImage("postgres", { env: {}, fallback: "postgres:17-alpine" })).toBe("postgres:17-alpine");
    expect(imageVariable("my-cache")).toBe("ONCEFLOW_MY_CACHE_IMAGE");
  });
});

describe("providerFromEnvironment", () => {
  it("reads ONCEFLOW_TESTKIT_PROVIDER and rejects unknown providers by name", () => {
    expect(providerFromEnvironment({})).toBeUndefined();
    expect(providerFromEnvironment({ ONCEFLOW_TESTKIT_PROVIDER: "testcontainers" })).toBe("testcontainers");
    expect(() => providerFromEnvironment({ ONCEFLOW_TESTKIT_PROVIDER: "docker" })).toThrow(
      /ONCEFLOW_TESTKIT_PROVIDER.*environment, testcontainers or local/s,
    );
  });
});

describe("probeContainerImages", () => {
  it("is available when the engine has the images, without pulling", async () => {
    const access = fakeEngine({ present: ["apache/kafka:3.9.1", REAPER] });
    const probe = await probeContainerImages({
      service: "kafka",
      image: "apache/kafka:3.9.1",
      env: {},
      access,
    });
    expect(probe.available).toBe(true);
    expect(access.pulls).toEqual([]);
  });

  it("pulls a missing image and is available when the pull brings it", async () => {
    const access = fakeEngine({ present: [REAPER], pullable: ["postgres:17-alpine"] });
    const probe = await probeContainerImages({
      service: "postgres",
      image: "postgres:17-alpine",
      env: {},
      access,
    });
    expect(probe.available).toBe(true);
    expect(access.pulls).toEqual(["postgres:17-alpine"]);
  });

  it("names the image and the variable to set when the pull fails", async () => {
    const access = fakeEngine({ present: [REAPER] });
    const probe = await probeContainerImages({
      service: "postgres",
      image: "postgres:17-alpine",
      env: {},
      access,
    });
    expect(probe.available).toBe(false);
    expect(probe.detail).toContain("postgres:17-alpine");
    expect(probe.detail).toContain("no such host");
    expect(probe.remedy).toContain("ONCEFLOW_POSTGRES_IMAGE");
  });

  it("gives up on a pull that never finishes", async () => {
    const access = fakeEngine({ present: [REAPER], hang: true });
    const probe = await probeContainerImages({
      service: "kafka",
      image: "apache/kafka:4.1.1",
      pullTimeoutMs: 50,
      env: {},
      access,
    });
    expect(probe.available).toBe(false);
    expect(probe.detail).toContain("did not finish within 50 ms");
  });

  it("needs testcontainers' reaper image too, unless the reaper is disabled", async () => {
    const access = fakeEngine({ present: ["redis:7"] });
    const probe = await probeContainerImages({ service: "redis", image: "redis:7", env: {}, access });
    expect(probe.available).toBe(false);
    expect(probe.detail).toContain(REAPER);
    expect(probe.remedy).toContain("TESTCONTAINERS_RYUK_DISABLED=true");

    const disabled = await probeContainerImages({
      service: "redis",
      image: "redis:7",
      env: { TESTCONTAINERS_RYUK_DISABLED: "true" },
      access,
    });
    expect(disabled.available).toBe(true);
    const ownReaper = await probeContainerImages({
      service: "redis",
      image: "redis:7",
      env: { RYUK_CONTAINER_IMAGE: "redis:7" },
      access,
    });
    expect(ownReaper.available).toBe(true);
  });
});

describe("provider choice with an engine that cannot get the image", () => {
  const local = async (): Promise<ProbeResult> => ({
    provider: "local",
    available: true,
    detail: "PostgreSQL 15 binaries",
    remedy: "install postgresql",
  });
  const environment = async (): Promise<ProbeResult> => ({
    provider: "environment",
    available: false,
    detail: "ONCEFLOW_POSTGRES_URL is not set",
    remedy: "set ONCEFLOW_POSTGRES_URL",
  });
  const offline = containerProbe(engine, {
    service: "postgres",
    image: "postgres:17-alpine",
    env: {},
    access: fakeEngine({}),
  });

  it("falls back to the next provider when none is pinned", async () => {
    const decision = await chooseProvider("PostgreSQL", providerOrder(), {
      environment,
      testcontainers: offline,
      local,
    });
    expect(decision.ok && decision.provider).toBe("local");
  });

  it("fails with the image and the variable when testcontainers is pinned", async () => {
    const decision = await chooseProvider("PostgreSQL", providerOrder({ provider: "testcontainers" }), {
      environment,
      testcontainers: offline,
      local,
    });
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.message).toContain("postgres:17-alpine");
    expect(decision.message).toContain("ONCEFLOW_POSTGRES_IMAGE");
    expect(decision.message).toContain("engine at localhost");
  });
});
