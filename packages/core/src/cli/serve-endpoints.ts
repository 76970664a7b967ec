import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { checkLiveness, checkReadiness, type HealthVerdict } from "../runtime/job-health.js";
import type { JobStatus } from "../runtime/job-status.js";

/**
 * What {@link serveEndpoints} serves: the metrics text and the job's status.
 *
 * @example
 * ```ts
 * const options: EndpointsOptions = { port: 9464, host: "127.0.0.1", status: () => job.status(), maxCheckpointAgeMs: 60_000,
 *   metrics: { text: () => registry.metrics(), contentType: registry.contentType } };
 * ```
 */
export interface EndpointsOptions {
  /** 0 picks a free port (see the returned `url`). */
  readonly port: number;
  readonly host: string;
  readonly metrics: { readonly text: () => Promise<string> | string; readonly contentType: string };
  readonly status: () => JobStatus;
  /** The limit of `/readyz` on the last completed checkpoint's age. */
  readonly maxCheckpointAgeMs: number;
}

/**
 * The running endpoints: where they listen, and how to stop them.
 *
 * @example
 * ```ts
 * console.log(`${endpoints.url}/metrics`);
 * await endpoints.close();
 * ```
 */
export interface RunningEndpoints {
  /** `http://host:port`, with the port actually bound. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text), `GET /healthz` (200 while the job is live, see
 * `checkLiveness`) and `GET /readyz` (200 when restored, running and checkpointing keeps up, see
 * `checkReadiness`); the probes answer 503 otherwise, each with a JSON body giving the reason.
 *
 * @example
 * ```ts
 * const endpoints = await serveEndpoints({ port: 0, host: "127.0.0.1", status: () => job.status(), maxCheckpointAgeMs: 60_000,
 *   metrics: { text: () => registry.metrics(), contentType: registry.contentType } });
 * ```
 */
export async function serveEndpoints(options: EndpointsOptions): Promise<RunningEndpoints> {
  const server = createServer((request, response) => {
    handle(options, request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      response.end(`${error instanceof Error ? error.message : String(error)}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new ConfigurationError(
          "--metrics-port",
          `cannot listen on ${options.host}:${options.port}: ${error.code === "EADDRINUSE" ? "the port is in use; pick another one" : error.message}`,
          { cause: error },
        ),
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(
  options: EndpointsOptions,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = new URL(request.url ?? "/", "http://localhost").pathname;
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.writeHead(405, { allow: "GET, HEAD" }).end();
    return;
  }
  switch (path) {
    case "/metrics": {
      const text = await options.metrics.text();
      response.writeHead(200, { "content-type": options.metrics.contentType }).end(text);
      return;
    }
    case "/healthz":
      return probe(response, options.status(), (status) => checkLiveness(status));
    case "/readyz":
      return probe(response, options.status(), (status) =>
        checkReadiness(status, { maxCheckpointAgeMs: options.maxCheckpointAgeMs }),
      );
    default:
      response
        .writeHead(404, { "content-type": "text/plain; charset=utf-8" })
        .end("not found: try /metrics, /healthz or /readyz\n");
  }
}

function probe(
  response: ServerResponse,
  status: JobStatus,
  check: (status: JobStatus) => HealthVerdict,
): void {
  const verdict = check(status);
  const body = {
    status: verdict.ok ? "ok" : "unavailable",
    reason: verdict.reason,
    state: status.state,
    lastCompletedCheckpoint: status.lastCompletedCheckpoint ?? null,
  };
  response
    .writeHead(verdict.ok ? 200 : 503, { "content-type": "application/json" })
    .end(`${JSON.stringify(body)}\n`);
}
