import { Socket } from "node:net";
import type { ServiceAddress, ServiceDefinition } from "./service-definition.js";

/**
 * Options of {@link redisService}.
 *
 * @example
 * ```ts
 * const options: RedisServiceOptions = { image: "redis:7.4", command: "/usr/local/bin/redis-server" };
 * ```
 */
export interface RedisServiceOptions {
  /** The container image (default `redis:7`). */
  readonly image?: string;
  /** The local executable (default `redis-server` on PATH). */
  readonly command?: string;
}

/**
 * Asks a Redis server for `INFO server` over a plain socket (no client library) and resolves with
 * its version; rejects while it does not answer or is still loading its data.
 *
 * @example
 * ```ts
 * await redisVersion({ host: "127.0.0.1", port: 6379 }); // "7.0.15"
 * ```
 */
export function redisVersion(address: ServiceAddress, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let reply = "";
    const fail = (error: Error): void => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(timeoutMs, () => fail(new Error(`no answer to INFO within ${timeoutMs} ms`)));
    socket.once("error", fail);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      reply += chunk;
      // "-LOADING …" or another error reply: not ready yet.
      if (reply.startsWith("-")) return fail(new Error(`Redis answered ${reply.trim()}`));
      const header = /^\$(\d+)\r\n/.exec(reply);
      if (header === null || Buffer.byteLength(reply) < header[0].length + Number(header[1])) return;
      socket.end();
      socket.destroy();
      resolve(/redis_version:([^\r\n]+)/.exec(reply)?.[1] ?? "unknown");
    });
    socket.connect(address.port, address.host, () => socket.write("INFO server\r\n"));
  });
}

/**
 * A ready {@link ServiceDefinition} for Redis: `ONCEFLOW_REDIS_URL` when set; else `redis:7` in a
 * container where a Docker engine answers; else `redis-server` on a free port, in memory only
 * (`--save "" --appendonly no`). Ready once `INFO server` answers (its version is reported).
 *
 * @example
 * ```ts
 * const redis = await startService(redisService(), { faultInjection: true });
 * const client = await createClient({ url: redis.url }).connect();
 * ```
 */
export function redisService(options: RedisServiceOptions = {}): ServiceDefinition {
  return {
    name: "redis",
    displayName: "Redis",
    defaultPort: 6379,
    url: ({ host, port }) => `redis://${host}:${port}`,
    ready: (address) => redisVersion(address),
    container: {
      image: options.image ?? "redis:7",
      port: 6379,
      command: ["redis-server", "--save", "", "--appendonly", "no"],
    },
    local: {
      command: options.command ?? "redis-server",
      // Foreground (no --daemonize), loopback only, nothing written to disk.
      args: ({ host, port, workDir }) => [
        "--port",
        String(port),
        "--bind",
        host,
        "--dir",
        workDir,
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
      ],
      install: "Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis",
    },
  };
}
