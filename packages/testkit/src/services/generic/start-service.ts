import { serviceUnavailable } from "../../errors/service-errors.js";
import { announceOnce, stderrWriter } from "../../runtime/announce.js";
import { containerProbe, providerFromEnvironment, resolveImage } from "../providers/container-images.js";
import { probeDockerEngine } from "../providers/docker-engine-probe.js";
import {
  chooseProvider,
  type Probe,
  type ProviderKind,
  providerOrder,
} from "../providers/provider-selection.js";
import { startContainerService } from "./container-service.js";
import { useEnvironmentService } from "./environment-service.js";
import { startLocalService } from "./local-service.js";
import {
  type ResolvedServiceDefinition,
  resolveServiceDefinition,
  type ServiceDefinition,
  type StartedService,
  type StartServiceOptions,
} from "./service-definition.js";
import {
  probeServiceCommand,
  probeServiceContainer,
  probeServiceEnvironment,
  serviceUrlFromEnvironment,
} from "./service-probes.js";

/**
 * The probes `startService` runs for a definition, one per provider (each run only when the ones
 * before it are unavailable). `probeEngine` replaces the Docker-engine probe (for tests).
 *
 * @example
 * ```ts
 * const probes = serviceProbes(resolveServiceDefinition(redisService()), process.env, () => probeDockerEngine());
 * const decision = await chooseProvider("Redis", providerOrder(), probes);
 * ```
 */
export function serviceProbes(
  definition: ResolvedServiceDefinition,
  env: NodeJS.ProcessEnv,
  probeEngine: Probe,
): Record<ProviderKind, Probe> {
  return {
    environment: async () => probeServiceEnvironment(definition, env),
    testcontainers: () => probeServiceContainer(definition, probeEngine),
    local: () => probeServiceCommand(definition, env),
  };
}

/** The definition with its container image replaced by the `image` option or `ONCEFLOW_<NAME>_IMAGE`. */
function withImage(
  definition: ResolvedServiceDefinition,
  option: string | undefined,
  env: NodeJS.ProcessEnv,
): ResolvedServiceDefinition {
  const container = definition.container;
  if (container === undefined) return definition;
  const image = resolveImage(definition.name, { option, env, fallback: container.image });
  return image === container.image ? definition : { ...definition, container: { ...container, image } };
}

/**
 * Starts (or finds) a real service for tests from a {@link ServiceDefinition} — the same provider
 * chain as Kafka and PostgreSQL: a service named by `ONCEFLOW_<NAME>_URL`; the definition's
 * container through testcontainers when a Docker engine answers; the definition's local command on a
 * free port. It waits until the definition's `ready` check passes. When no provider can run it, it
 * throws an `OnceflowError` (`SERVICE_UNAVAILABLE`) listing what was tried and what to install; it
 * never skips. The choice is written once per run to `options.writer` (stderr by default).
 *
 * Processes and containers it starts are stopped by `stop()`, and by exit and signal handlers and a
 * detached reaper if the test process ends first. `kill()`/`start()` crash the service and bring it
 * back on the same port (not for a service named by the variable: use `faultInjection: true`).
 *
 * @example
 * ```ts
 * const redis = await startService(redisService(), { faultInjection: true });
 * const client = createClient({ url: redis.url });
 * await redis.kill();
 * await redis.start();
 * await redis.stop();
 * ```
 */
export async function startService(
  definition: ServiceDefinition,
  options: StartServiceOptions = {},
): Promise<StartedService> {
  const env = options.env ?? process.env;
  const resolved = withImage(resolveServiceDefinition(definition), options.image, env);
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const order = providerOrder({
    provider: options.provider ?? providerFromEnvironment(env),
    faultInjection: options.faultInjection,
  });
  const engine = () => probeDockerEngine({ timeoutMs: options.dockerProbeTimeoutMs });
  const probeEngine =
    resolved.container === undefined
      ? engine
      : containerProbe(engine, {
          service: resolved.name,
          image: resolved.container.image,
          pullTimeoutMs: options.imagePullTimeoutMs,
        });
  const decision = await chooseProvider(
    resolved.displayName,
    order,
    serviceProbes(resolved, env, probeEngine),
  );
  if (!decision.ok) {
    throw serviceUnavailable(decision.message, { service: resolved.name, tried: decision.tried });
  }
  const started = Date.now();
  let service: StartedService;
  switch (decision.provider) {
    case "environment":
      // A named service is running already: it gets at most 30 s to answer.
      service = await useEnvironmentService(
        resolved,
        serviceUrlFromEnvironment(resolved, env) ?? "",
        Math.min(startTimeoutMs, 30_000),
      );
      break;
    case "testcontainers":
      service = await startContainerService(resolved, startTimeoutMs);
      break;
    case "local":
      service = await startLocalService(resolved, { startTimeoutMs, env });
      break;
  }
  announceOnce(
    `${resolved.name}|${service.provider}|${service.version}`,
    `onceflow testkit: ${resolved.displayName} ${service.version} via ${service.provider} ` +
      `(${decision.probe.detail}) at ${service.host}:${service.port}, ready in ${Date.now() - started} ms`,
    options.writer ?? stderrWriter,
    env,
  );
  return service;
}
