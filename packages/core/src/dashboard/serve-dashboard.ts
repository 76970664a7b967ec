import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { assertCheckpointName } from "../checkpoint/checkpoint-files.js";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { ConfigurationError, OnceflowError } from "../errors/onceflow-error.js";
import { createDashboardApi } from "./dashboard-api.js";

/**
 * Options of {@link serveDashboard}.
 *
 * @example
 * ```ts
 * const options: DashboardOptions = { storage: filesystem("./checkpoints"), jobId: "orders", port: 8080 };
 * ```
 */
export interface DashboardOptions {
  /** The job's checkpoint storage: the history, restores, pending transactions and split positions come from it. */
  readonly storage: CheckpointStorage;
  readonly jobId: string;
  /** The port to listen on; 0 picks a free one (the returned `url` says which). */
  readonly port: number;
  /** The address to bind (default `127.0.0.1`: only this machine can see the page). */
  readonly host?: string;
  /** The job's live metrics in the Prometheus text format, in process (for example a prom-client registry's `metrics()`). */
  readonly metricsText?: () => Promise<string> | string;
  /** Or the metrics endpoint of a running job to fetch them from, such as `http://127.0.0.1:9464/metrics`. */
  readonly metricsUrl?: string;
}

/**
 * A running dashboard: where it is, and how to stop it.
 *
 * @example
 * ```ts
 * const dashboard = await serveDashboard({ storage, jobId: "orders", port: 0 });
 * console.log(dashboard.url);
 * await dashboard.close();
 * ```
 */
export interface Dashboard {
  /** `http://<host>:<port>/`. */
  readonly url: string;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

/**
 * Serves the checkpoint dashboard of a job: one self-contained page (no CDN, no internet needed)
 * with the checkpoints over time (duration and size, failures marked), restores and incarnations,
 * each sink's pending transactions with their age, each source split's position, and — given
 * `metricsText` or `metricsUrl` — the live rates, failures, restarts and lag. JSON behind it at
 * `/api/checkpoints` and `/api/live`.
 *
 * Read-only: it only lists and loads checkpoints, answers `GET`/`HEAD` and refuses every other
 * method with 405. Bound to 127.0.0.1 unless `host` says otherwise: the page shows transaction
 * handles and positions, so expose it beyond the machine only behind your own access control.
 *
 * @throws ConfigurationError when the port or job id is invalid or the port is taken.
 * @example
 * ```ts
 * import { filesystem, serveDashboard } from "@onceflow/core";
 *
 * const dashboard = await serveDashboard({ storage: filesystem("./checkpoints"), jobId: "orders", port: 8080 });
 * console.log(`dashboard at ${dashboard.url}`); // http://127.0.0.1:8080/
 * ```
 */
export async function serveDashboard(options: DashboardOptions): Promise<Dashboard> {
  const host = options.host ?? "127.0.0.1";
  assertCheckpointName("jobId", options.jobId);
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65_535) {
    throw new ConfigurationError(
      "port",
      `must be a whole number from 0 to 65535, got ${String(options.port)}`,
    );
  }
  const api = createDashboardApi(options);
  const server = createServer((request, response) => {
    const method = request.method ?? "GET";
    if (method !== "GET" && method !== "HEAD") {
      response.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" });
      response.end("the dashboard is read-only: only GET\n");
      return;
    }
    api.get(request.url ?? "/").then(
      (answer) => {
        response.writeHead(answer.status, {
          "content-type": answer.contentType,
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          // Nothing but this page's own inline code and its own origin.
          "content-security-policy":
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'",
        });
        response.end(method === "HEAD" ? undefined : answer.body);
      },
      (error: unknown) => {
        response.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
        response.end(`${error instanceof Error ? error.message : String(error)}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        error.code === "EADDRINUSE" || error.code === "EACCES" || error.code === "EADDRNOTAVAIL"
          ? new ConfigurationError(
              "port",
              `cannot listen on ${host}:${options.port} (${error.code}): choose another port or host`,
              { cause: error },
            )
          : new OnceflowError("SERVICE_UNAVAILABLE", `the dashboard cannot listen: ${error.message}`, {
              cause: error,
            }),
      );
    });
    server.listen(options.port, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const shownHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${port}/`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
