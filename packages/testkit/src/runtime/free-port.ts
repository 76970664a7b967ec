import { createServer } from "node:net";

/**
 * Asks the operating system for a TCP port that is free right now on `host`.
 *
 * @example
 * ```ts
 * const port = await findFreePort();
 * ```
 */
export function findFreePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port assigned"))));
    });
  });
}

/**
 * Several distinct free ports (a broker needs one for clients and one for its controller).
 *
 * @example
 * ```ts
 * const [port, controllerPort] = await findFreePorts(2);
 * ```
 */
export async function findFreePorts(count: number, host = "127.0.0.1"): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await findFreePort(host));
  return [...ports];
}
