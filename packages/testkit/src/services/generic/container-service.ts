import { serviceUnavailable } from "../../errors/service-errors.js";
import { findFreePort } from "../../runtime/free-port.js";
import { pollUntilReady } from "../../runtime/readiness.js";
import { controlContainer } from "../providers/container-control.js";
import { loadTestcontainers } from "../providers/testcontainers-loader.js";
import type { ResolvedServiceDefinition, StartedService } from "./service-definition.js";

/**
 * Starts the definition's container through testcontainers' `GenericContainer`. The host port is a
 * free port picked at run time and bound explicitly, so it stays the same when the container is
 * killed and started again.
 *
 * @example
 * ```ts
 * const redis = await startContainerService(resolveServiceDefinition(redisService()), 60_000);
 * ```
 */
export async function startContainerService(
  definition: ResolvedServiceDefinition,
  startTimeoutMs: number,
): Promise<StartedService> {
  const container = definition.container;
  if (container === undefined)
    throw serviceUnavailable(`${definition.displayName}: no container in the definition`);
  const { GenericContainer } = await loadTestcontainers();
  const port = await findFreePort();
  let builder = new GenericContainer(container.image)
    .withExposedPorts({ container: container.port, host: port })
    .withStartupTimeout(startTimeoutMs);
  if (container.command !== undefined) builder = builder.withCommand([...container.command]);
  if (container.environment !== undefined) builder = builder.withEnvironment({ ...container.environment });
  const started = await builder.start();
  const control = await controlContainer(started);
  const address = { host: started.getHost(), port };

  let version = container.image;
  const waitReady = async (): Promise<void> => {
    const outcome = await pollUntilReady(() => definition.ready(address), { timeoutMs: startTimeoutMs });
    if (!outcome.ready) {
      throw serviceUnavailable(
        `${definition.displayName} container ${container.image} at ${address.host}:${port} is not ready: ` +
          `${outcome.problem}\n--- container log tail ---\n${await control.logTail()}`,
        { service: definition.name, image: container.image },
      );
    }
    if (typeof outcome.value === "string" && outcome.value !== "") version = outcome.value;
  };
  try {
    await waitReady();
  } catch (error) {
    await control.remove();
    throw error;
  }
  let running = true;
  let stopped = false;
  return {
    name: definition.name,
    url: definition.url(address),
    host: address.host,
    port,
    provider: "testcontainers",
    get version() {
      return version;
    },
    pid: undefined,
    workDir: undefined,
    async kill() {
      if (!running) return;
      await control.kill("SIGKILL");
      running = false;
    },
    async start() {
      if (stopped) {
        throw serviceUnavailable(
          `${definition.displayName} start(): this service was stopped and its container removed`,
        );
      }
      if (running) return;
      await control.start();
      running = true;
      await waitReady();
    },
    async stop() {
      running = false;
      stopped = true;
      await started.stop({ timeout: 20_000 }).catch(() => {});
      await control.remove();
    },
  };
}
