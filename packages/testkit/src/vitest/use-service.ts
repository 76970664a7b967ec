import { afterAll, beforeAll } from "vitest";
import type {
  ServiceDefinition,
  StartedService,
  StartServiceOptions,
} from "../services/generic/service-definition.js";
import { startService } from "../services/generic/start-service.js";

/**
 * Starts a service from a definition for the tests of the current file or `describe` block (in
 * `beforeAll`) and stops it afterwards (in `afterAll`). Returns a getter, valid inside tests. The
 * environment variable (`ONCEFLOW_<NAME>_URL`) is used when set, unless `faultInjection: true`.
 *
 * @example
 * ```ts
 * const redis = useService(redisService(), { faultInjection: true });
 * it("survives a Redis crash", async () => {
 *   await redis().kill();
 *   await redis().start();
 * });
 * ```
 */
export function useService(
  definition: ServiceDefinition,
  options: StartServiceOptions = {},
): () => StartedService {
  let service: StartedService | undefined;
  beforeAll(async () => {
    service = await startService(definition, options);
  });
  afterAll(async () => {
    await service?.stop();
  });
  return () => {
    if (service === undefined) {
      throw new Error(`useService(${definition.name}): the service is only there inside tests`);
    }
    return service;
  };
}
