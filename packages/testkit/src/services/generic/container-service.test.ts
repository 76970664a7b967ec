import { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { containerProbe, resolveImage } from "../providers/container-images.js";
import { probeDockerEngine } from "../providers/docker-engine-probe.js";
import { redisService, redisVersion } from "./redis-service.js";
import type { ServiceAddress, ServiceDefinition, StartedService } from "./service-definition.js";
import { startService } from "./start-service.js";

/** The server version from a MySQL/MariaDB greeting (protocol 10): no client library needed. */
function mariadbVersion(address: ServiceAddress, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let received = Buffer.alloc(0);
    const fail = (error: Error): void => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(timeoutMs, () => fail(new Error(`no greeting within ${timeoutMs} ms`)));
    socket.once("error", fail);
    socket.once("close", () => fail(new Error("closed before a greeting")));
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf(0, 5);
      if (received.length < 5 || end < 0) return;
      socket.removeAllListeners("close");
      socket.destroy();
      if (received[4] !== 10) return reject(new Error(`not a greeting (first byte ${received[4]})`));
      resolve(received.subarray(5, end).toString("latin1"));
    });
    socket.connect(address.port, address.host);
  });
}

// The definition the testkit README describes for MariaDB, container only.
const mariadb: ServiceDefinition = {
  name: "mariadb",
  displayName: "MariaDB",
  defaultPort: 3306,
  url: ({ host, port }) => `mysql://root@${host}:${port}/`,
  ready: (address) => mariadbVersion(address),
  container: { image: "mariadb:11", port: 3306, environment: { MARIADB_ALLOW_EMPTY_ROOT_PASSWORD: "1" } },
};

function answers(service: StartedService, check: (address: ServiceAddress) => Promise<string>) {
  return check({ host: service.host, port: service.port }).then(
    () => true,
    () => false,
  );
}

const pinned = process.env.ONCEFLOW_TESTKIT_PROVIDER === "testcontainers";

describe.each([
  { definition: redisService(), check: (address: ServiceAddress) => redisVersion(address) },
  { definition: mariadb, check: mariadbVersion },
])("$definition.displayName in a container (GenericContainer)", ({ definition, check }) => {
  it("starts, is killed and started again on the same port, and is gone after stop()", {
    timeout: 120_000,
  }, async () => {
    const image = resolveImage(definition.name, {
      env: process.env,
      fallback: definition.container?.image ?? "",
    });
    const engine = await probeDockerEngine({ timeoutMs: 20_000 });
    const usable = engine.available
      ? await containerProbe(async () => engine, { service: definition.name, image })()
      : engine;
    if (!usable.available) {
      // The container run of CI pins the provider: there, a container that cannot start is a failure.
      expect(pinned, `${usable.detail}; ${usable.remedy}`).toBe(false);
      const failure = startService(definition, { provider: "testcontainers" });
      await expect(failure).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });
      // An engine that answers but lacks the image says which image.
      if (engine.available) await expect(failure).rejects.toThrow(image);
      return;
    }
    // Within the test's time: a container that does not answer after its restart fails with the
    // container's log, not as a test timeout.
    const service = await startService(definition, {
      provider: "testcontainers",
      faultInjection: true,
      startTimeoutMs: 30_000,
      writer: () => {},
    });
    try {
      expect(service.provider).toBe("testcontainers");
      expect(service.version).toMatch(/^\d+\.\d+/);
      expect(await answers(service, check)).toBe(true);
      await service.kill();
      expect(await answers(service, check)).toBe(false);
      await service.start();
      expect(await answers(service, check)).toBe(true);
    } finally {
      await service.stop();
    }
    expect(await answers(service, check)).toBe(false);
    await expect(service.start()).rejects.toThrow(/stopped/);
  });
});
