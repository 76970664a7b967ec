import { ConfigurationError } from "@onceflow/core";
import type { ServiceWriter } from "../../runtime/announce.js";
import { tcpConnects } from "../../runtime/readiness.js";
import type { ProviderKind } from "../providers/provider-selection.js";

/**
 * Where a running service listens, as a definition's `url` and `ready` receive it.
 *
 * @example
 * ```ts
 * const address: ServiceAddress = { host: "127.0.0.1", port: 6379 };
 * ```
 */
export interface ServiceAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * How to run a service in a container (testcontainers' `GenericContainer`).
 *
 * @example
 * ```ts
 * const container: ServiceContainer = { image: "redis:7", port: 6379, command: ["redis-server", "--save", ""] };
 * ```
 */
export interface ServiceContainer {
  /** The image, e.g. `redis:7` or `mariadb:11`. */
  readonly image: string;
  /** The port the service listens on inside the container. */
  readonly port: number;
  /** The command to run instead of the image's default. */
  readonly command?: readonly string[];
  /** Environment variables of the container. */
  readonly environment?: Readonly<Record<string, string>>;
}

/**
 * What a local command gets to build its arguments: the free port picked for it and its own
 * temporary folder (deleted on stop).
 *
 * @example
 * ```ts
 * const args = ({ port, workDir }: LocalServiceContext) => ["--port", String(port), "--dir", workDir];
 * ```
 */
export interface LocalServiceContext {
  readonly host: string;
  readonly port: number;
  readonly workDir: string;
}

/**
 * How to run a service as a local process. The process must stay in the foreground (no
 * daemonizing): the testkit owns it, kills it and cleans up after it.
 *
 * @example
 * ```ts
 * const local: ServiceCommand = {
 *   command: "redis-server",
 *   args: ({ port }) => ["--port", String(port), "--save", "", "--appendonly", "no"],
 *   install: "apt-get install redis-server",
 * };
 * ```
 */
export interface ServiceCommand {
  /** The executable, looked up on `PATH` (or an absolute path). */
  readonly command: string;
  /** Its arguments for one start; the same port is passed again after `kill()`/`start()`. */
  args(context: LocalServiceContext): readonly string[];
  /** What to install when the command is missing, e.g. `apt-get install redis-server`. */
  readonly install: string;
  /** Arguments that make the command print its version and exit, to check it is there (default `["--version"]`). */
  readonly versionArgs?: readonly string[];
  /** Extra environment variables for the process. */
  readonly environment?: Readonly<Record<string, string>>;
}

/**
 * A service the testkit can provide, the way it provides Kafka and PostgreSQL: named by an
 * environment variable, else a container where a Docker engine answers, else a local process.
 * Give `container`, `local` or both.
 *
 * @example
 * ```ts
 * const memcached: ServiceDefinition = {
 *   name: "memcached",
 *   url: ({ host, port }) => `memcached://${host}:${port}`,
 *   container: { image: "memcached:1.6", port: 11211 },
 *   local: { command: "memcached", args: ({ port }) => ["-p", String(port), "-l", "127.0.0.1"], install: "apt-get install memcached" },
 * };
 * ```
 */
export interface ServiceDefinition {
  /** Lowercase letters, digits and `-`, e.g. `redis`; names the variable `ONCEFLOW_REDIS_URL`. */
  readonly name: string;
  /** Shown in messages (default: `name`), e.g. `Redis`. */
  readonly displayName?: string;
  /** The variable naming a running service (default `ONCEFLOW_<NAME>_URL`). */
  readonly environmentVariable?: string;
  /** The port of a URL in the variable that has none, e.g. 6379. */
  readonly defaultPort?: number;
  /** The URL clients connect to, e.g. `redis://127.0.0.1:6379`. */
  url(address: ServiceAddress): string;
  /**
   * Resolves once the service answers (polled until the start timeout; a rejection means "not yet",
   * its message is shown when it never gets ready). May resolve with the service's version (a string). Default:
   * a TCP connection succeeds.
   */
  ready?(address: ServiceAddress): Promise<unknown>;
  readonly container?: ServiceContainer;
  readonly local?: ServiceCommand;
}

/**
 * Options of `startService`.
 *
 * @example
 * ```ts
 * const redis = await startService(redisService(), { faultInjection: true, startTimeoutMs: 30_000 });
 * ```
 */
export interface StartServiceOptions {
  /** Use only this provider instead of trying environment → testcontainers → local. */
  provider?: ProviderKind;
  /** This test kills or restarts the service: skip the environment variable and start a private one. */
  faultInjection?: boolean;
  /** How long to wait for the service to get ready. Default 60 s. */
  startTimeoutMs?: number;
  /** Where the "which provider/version" line goes; default stderr. */
  writer?: ServiceWriter;
  /**
   * The container image instead of the definition's; default `ONCEFLOW_<NAME>_IMAGE` (e.g.
   * `ONCEFLOW_REDIS_IMAGE`), else the definition's `container.image`.
   */
  image?: string;
  /** How long the Docker-engine probe may take. Default 15 s. */
  dockerProbeTimeoutMs?: number;
  /**
   * How long pulling a missing image may take before the container provider counts as unavailable
   * (the next provider is tried unless one is pinned). Default 300 s.
   */
  imagePullTimeoutMs?: number;
  /** The environment to read variables from; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * A running service for tests, whatever provides it.
 *
 * @example
 * ```ts
 * const redis = await startService(redisService(), { faultInjection: true });
 * await redis.kill();  // SIGKILL (docker kill for a container): nothing answers on redis.port
 * await redis.start(); // the same port again, once ready
 * await redis.stop();
 * ```
 */
export interface StartedService {
  /** The definition's name, e.g. `redis`. */
  readonly name: string;
  /** What clients connect to, from the definition's `url` (or the environment variable as given). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly provider: ProviderKind;
  /** What `ready` reported, else the image tag or the local command's version line, else "unknown". */
  readonly version: string;
  /** The process id (local provider only; it changes on `start()`), undefined while killed. */
  readonly pid: number | undefined;
  /** The temporary folder given to the local command, with its log `service.log` (local provider only). */
  readonly workDir: string | undefined;
  /** Kills the service the hard way (SIGKILL, or `docker kill`); nothing answers until {@link start}. */
  kill(): Promise<void>;
  /** Brings a killed service back on the same port; resolves once it is ready. */
  start(): Promise<void>;
  /** Stops the service (SIGTERM, then SIGKILL after a grace period) and deletes its folder or container. */
  stop(): Promise<void>;
}

/**
 * A definition with its defaults filled in and checked.
 *
 * @example
 * ```ts
 * const resolved: ResolvedServiceDefinition = resolveServiceDefinition(redisService());
 * resolved.environmentVariable; // "ONCEFLOW_REDIS_URL"
 * ```
 */
export interface ResolvedServiceDefinition extends ServiceDefinition {
  readonly displayName: string;
  readonly environmentVariable: string;
  /** The variable the global setup sets next to `environmentVariable` when it shares the service. */
  readonly sharedMarker: string;
  ready(address: ServiceAddress): Promise<unknown>;
}

const NAME = /^[a-z][a-z0-9-]*$/;
const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;

function validPort(port: number): boolean {
  return Number.isInteger(port) && port > 0 && port < 65_536;
}

/**
 * The environment variable that names a running service of this name: `ONCEFLOW_<NAME>_URL`, the
 * name upper-cased with `-` as `_`.
 *
 * @example
 * ```ts
 * serviceVariable("redis"); // "ONCEFLOW_REDIS_URL"
 * serviceVariable("my-store"); // "ONCEFLOW_MY_STORE_URL"
 * ```
 */
export function serviceVariable(name: string): string {
  return `ONCEFLOW_${name.toUpperCase().replaceAll("-", "_")}_URL`;
}

/**
 * Checks a definition and fills in its defaults. Throws a `ConfigurationError` naming the field
 * to change (`definition.name`, `definition.container.port` …).
 *
 * @example
 * ```ts
 * const { environmentVariable } = resolveServiceDefinition({ name: "redis", url: ({ host, port }) => `redis://${host}:${port}`, local });
 * ```
 */
export function resolveServiceDefinition(definition: ServiceDefinition): ResolvedServiceDefinition {
  if (typeof definition.name !== "string" || !NAME.test(definition.name)) {
    throw new ConfigurationError(
      "definition.name",
      `must be lowercase letters, digits and "-", starting with a letter (it names the variable ONCEFLOW_<NAME>_URL), got ${JSON.stringify(definition.name)}`,
    );
  }
  if (typeof definition.url !== "function") {
    throw new ConfigurationError(
      "definition.url",
      "must be a function ({ host, port }) => the URL clients connect to",
    );
  }
  if (definition.container === undefined && definition.local === undefined) {
    throw new ConfigurationError(
      "definition.container",
      `${definition.name}: give a container (image and port), a local command, or both; without either the testkit can only use ${serviceVariable(definition.name)}`,
    );
  }
  if (definition.container !== undefined) {
    if (!definition.container.image) {
      throw new ConfigurationError("definition.container.image", "must name an image, e.g. redis:7");
    }
    if (!validPort(definition.container.port)) {
      throw new ConfigurationError(
        "definition.container.port",
        `must be the port inside the container (1-65535), got ${definition.container.port}`,
      );
    }
  }
  if (definition.local !== undefined) {
    if (!definition.local.command) {
      throw new ConfigurationError("definition.local.command", "must name an executable, e.g. redis-server");
    }
    if (typeof definition.local.args !== "function") {
      throw new ConfigurationError(
        "definition.local.args",
        "must be a function ({ port, host, workDir }) => the command's arguments",
      );
    }
  }
  if (definition.defaultPort !== undefined && !validPort(definition.defaultPort)) {
    throw new ConfigurationError("definition.defaultPort", `must be 1-65535, got ${definition.defaultPort}`);
  }
  const environmentVariable = definition.environmentVariable ?? serviceVariable(definition.name);
  if (!VARIABLE.test(environmentVariable)) {
    throw new ConfigurationError(
      "definition.environmentVariable",
      `must be a variable name, got ${JSON.stringify(environmentVariable)}`,
    );
  }
  return {
    ...definition,
    displayName: definition.displayName ?? definition.name,
    environmentVariable,
    sharedMarker: `ONCEFLOW_TESTKIT_SHARED_${environmentVariable.replace(/^ONCEFLOW_/, "")}`,
    ready: definition.ready?.bind(definition) ?? defaultReady,
  };
}

async function defaultReady(address: ServiceAddress): Promise<unknown> {
  await tcpConnects(address.host, address.port);
  return undefined;
}
