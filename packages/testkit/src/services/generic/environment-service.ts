import { faultInjectionUnsupported, serviceUnavailable } from "../../errors/service-errors.js";
import { pollUntilReady } from "../../runtime/readiness.js";
import type { ResolvedServiceDefinition, StartedService } from "./service-definition.js";
import { addressOfUrl } from "./service-probes.js";

/**
 * Uses the service named by the definition's variable. It must answer the definition's readiness
 * check: a named service that does not is an error, not a reason to start another one. kill/start
 * throw (the testkit does not own it); stop only forgets it.
 *
 * @example
 * ```ts
 * const redis = await useEnvironmentService(resolveServiceDefinition(redisService()), "redis://127.0.0.1:6379", 30_000);
 * ```
 */
export async function useEnvironmentService(
  definition: ResolvedServiceDefinition,
  url: string,
  timeoutMs: number,
): Promise<StartedService> {
  const variable = definition.environmentVariable;
  const address = addressOfUrl(url, definition.defaultPort);
  if ("problem" in address) {
    throw serviceUnavailable(`${variable}: ${address.problem}`, { service: definition.name, variable });
  }
  const outcome = await pollUntilReady(() => definition.ready(address), { timeoutMs });
  if (!outcome.ready) {
    throw serviceUnavailable(
      `${variable} names a ${definition.displayName} at ${address.host}:${address.port} that is not ready: ` +
        `${outcome.problem}. Start it, or unset ${variable} to let the testkit start one.`,
      { service: definition.name, variable },
    );
  }
  const unsupported = (operation: string) =>
    Promise.reject(faultInjectionUnsupported(definition.displayName, operation, variable));
  return {
    name: definition.name,
    url,
    host: address.host,
    port: address.port,
    provider: "environment",
    version: typeof outcome.value === "string" && outcome.value !== "" ? outcome.value : "unknown",
    pid: undefined,
    workDir: undefined,
    kill: () => unsupported("kill()"),
    start: () => unsupported("start()"),
    stop: () => Promise.resolve(),
  };
}
