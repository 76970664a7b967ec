import net from "node:net";
import { sql } from "./postgres.js";

/**
 * A TCP proxy in front of a real PostgreSQL that can end a new connection at the worst moment: the
 * instant its startup finishes. For a connection armed with {@link terminateNext}, it holds the
 * server's first ReadyForQuery, terminates that backend (`pg_terminate_backend`, the real 57P01
 * FATAL), and delivers ReadyForQuery and the FATAL in one write — as TCP may when a server ends a
 * session just after accepting it (a shutdown, an administrator, a failover). pg-pool hands the
 * connection out on ReadyForQuery and the FATAL is parsed in the same read. Other connections pass
 * through untouched.
 *
 * @example
 * ```ts
 * const proxy = await HandoverTerminatingProxy.start(url);
 * proxy.terminateNext();
 * await new pg.Pool({ connectionString: proxy.url }).query("SELECT 1"); // rejects with 57P01
 * await proxy.close();
 * ```
 */
export class HandoverTerminatingProxy {
  private armed = 0;
  /** Backends terminated at hand-over so far. */
  terminated = 0;
  /** Failures of the proxy itself (a terminate that failed), for the test to check. */
  readonly errors: unknown[] = [];
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    private readonly target: URL,
    private readonly adminUrl: string,
  ) {
    server.on("connection", (socket) => this.accept(socket));
  }

  /** Listens on a free local port in front of the server that `url` names. */
  static async start(url: string): Promise<HandoverTerminatingProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return new HandoverTerminatingProxy(server, new URL(url), url);
  }

  /** `url` with the proxy as host and port. */
  get url(): string {
    const address = this.server.address() as net.AddressInfo;
    const url = new URL(this.target.href);
    url.hostname = "127.0.0.1";
    url.port = String(address.port);
    return url.href;
  }

  /** The next `count` new connections are terminated as their startup finishes. */
  terminateNext(count = 1): void {
    this.armed += count;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(Number(this.target.port || "5432"), this.target.hostname);
    this.sockets.add(client).add(upstream);
    const forget = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on("error", forget).on("close", forget);
    upstream.on("error", forget);
    client.on("data", (chunk) => upstream.write(chunk));
    const armed = this.armed > 0;
    if (armed) this.armed -= 1;
    if (!armed) {
      upstream.on("data", (chunk) => client.write(chunk));
      upstream.on("close", forget);
      return;
    }
    // Server messages: a type byte and a length (which counts itself). Forwarded one by one until
    // the first ReadyForQuery ('Z'); from there everything is held until the server hangs up.
    let pending = Buffer.alloc(0);
    let pid: number | undefined;
    let held: Buffer[] | undefined;
    upstream.on("data", (chunk: Buffer) => {
      if (held !== undefined) {
        held.push(chunk);
        return;
      }
      pending = Buffer.concat([pending, chunk]);
      while (held === undefined && pending.length >= 5) {
        const size = 1 + pending.readInt32BE(1);
        if (pending.length < size) break;
        const message = pending.subarray(0, size);
        pending = pending.subarray(size);
        const type = String.fromCharCode(message[0] ?? 0);
        if (type === "K") pid = message.readInt32BE(5);
        if (type !== "Z") {
          client.write(message);
          continue;
        }
        held = [message, pending];
        this.terminate(pid, forget);
      }
    });
    upstream.on("close", () => {
      // ReadyForQuery and the FATAL in one write, then the hang-up.
      if (held !== undefined) client.end(Buffer.concat(held));
      else forget();
    });
  }

  private terminate(pid: number | undefined, giveUp: () => void): void {
    if (pid === undefined) {
      this.errors.push(new Error("the server sent no BackendKeyData before ReadyForQuery"));
      giveUp();
      return;
    }
    this.terminated += 1;
    sql(this.adminUrl, "SELECT pg_terminate_backend($1)", [pid]).catch((error: unknown) => {
      this.errors.push(error);
      giveUp();
    });
  }
}
