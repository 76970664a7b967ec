import { runCommand } from "../../runtime/processes.js";
import type { ProbeResult } from "../providers/provider-selection.js";
import { userProvided } from "../shared-markers.js";
import type { ResolvedServiceDefinition, ServiceAddress } from "./service-definition.js";

/**
 * The URL in the definition's variable (`ONCEFLOW_<NAME>_URL`), unless the testkit's own global setup
 * put it there for the run's shared service.
 *
 * @example
 * ```ts
 * serviceUrlFromEnvironment(resolveServiceDefinition(redisService()), { ONCEFLOW_REDIS_URL: "redis://h:6379" });
 * ```
 */
export function serviceUrlFromEnvironment(
  definition: ResolvedServiceDefinition,
  env: NodeJS.ProcessEnv,
): string | undefined {
  return userProvided(env, definition.environmentVariable, definition.sharedMarker);
}

/**
 * Host and port of a URL from the environment (`scheme://[user@]host[:port][/…]`), the definition's
 * `defaultPort` when it has none; a problem when it is not such a URL.
 *
 * @example
 * ```ts
 * addressOfUrl("redis://127.0.0.1:6380/0", 6379); // { host: "127.0.0.1", port: 6380 }
 * ```
 */
export function addressOfUrl(url: string, defaultPort?: number): ServiceAddress | { problem: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { problem: `${JSON.stringify(url)} is not a URL (scheme://host:port)` };
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = parsed.port === "" ? defaultPort : Number(parsed.port);
  if (host === "") return { problem: `${JSON.stringify(url)} names no host` };
  if (port === undefined)
    return { problem: `${JSON.stringify(url)} names no port (and the definition has no defaultPort)` };
  return { host, port };
}

/**
 * Whether the environment names a running service. Pure: it does not connect.
 *
 * @example
 * ```ts
 * probeServiceEnvironment(resolveServiceDefinition(redisService()), process.env).available;
 * ```
 */
export function probeServiceEnvironment(
  definition: ResolvedServiceDefinition,
  env: NodeJS.ProcessEnv,
): ProbeResult {
  const variable = definition.environmentVariable;
  const url = serviceUrlFromEnvironment(definition, env);
  return {
    provider: "environment",
    available: url !== undefined,
    detail:
      url !== undefined
        ? `${variable} is set`
        : `${variable} is not set (or names the run's shared ${definition.displayName})`,
    remedy: `set ${variable}=${definition.url({ host: "host", port: definition.defaultPort ?? definition.container?.port ?? 1234 })} to a running ${definition.displayName}`,
  };
}

/**
 * The container provider for a definition: unavailable without a `container`, else what the
 * Docker-engine probe found (run only then).
 *
 * @example
 * ```ts
 * await probeServiceContainer(definition, () => probeDockerEngine({ timeoutMs: 10_000 }));
 * ```
 */
export async function probeServiceContainer(
  definition: ResolvedServiceDefinition,
  probeEngine: () => Promise<ProbeResult>,
): Promise<ProbeResult> {
  if (definition.container === undefined) {
    return {
      provider: "testcontainers",
      available: false,
      detail: `the ${definition.displayName} definition has no container image`,
      remedy: "add container: { image, port } to the service definition",
    };
  }
  const engine = await probeEngine();
  return engine.available
    ? { ...engine, detail: `${definition.container.image} on the ${engine.detail}` }
    : engine;
}

/**
 * The local provider for a definition: unavailable without a `local` command, else whether the
 * command runs (`<command> --version`, or its `versionArgs`). On success `detail` is its first line.
 *
 * @example
 * ```ts
 * const probe = await probeServiceCommand(resolveServiceDefinition(redisService()));
 * probe.detail; // "redis-server: Redis server v=7.0.15 …"
 * ```
 */
export async function probeServiceCommand(
  definition: ResolvedServiceDefinition,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ProbeResult> {
  const local = definition.local;
  if (local === undefined) {
    return {
      provider: "local",
      available: false,
      detail: `the ${definition.displayName} definition has no local command`,
      remedy: "add local: { command, args, install } to the service definition",
    };
  }
  const remedy = `install ${local.command} (${local.install}) so that it is on PATH`;
  const args = local.versionArgs ?? ["--version"];
  try {
    const result = await runCommand(local.command, args, { timeoutMs: 15_000, env });
    const firstLine = `${result.stdout}${result.stderr}`.trim().split("\n")[0] ?? "";
    if (result.code !== 0) {
      return {
        provider: "local",
        available: false,
        detail: `"${local.command} ${args.join(" ")}" ended with ${result.timedOut ? "a timeout" : `exit ${result.code ?? result.signal}`}: ${firstLine}`,
        remedy,
      };
    }
    return { provider: "local", available: true, detail: `${local.command}: ${firstLine}`, remedy };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return {
      provider: "local",
      available: false,
      detail: `${local.command} was not found (${code})`,
      remedy,
    };
  }
}
