import { faultInjectionUnsupported, serviceUnavailable } from "../../errors/service-errors.js";
import type { ProbeResult } from "../providers/provider-selection.js";
import { SHARED_MARKERS, userProvided } from "../shared-markers.js";
import { waitUntilPostgresAccepts } from "./postgres-readiness.js";
import type { PostgresService } from "./postgres-service.js";

/**
 * The variable naming an existing server: a `postgresql://` connection string.
 *
 * @example
 * ```ts
 * process.env[POSTGRES_URL_VARIABLE] = "postgresql://postgres@127.0.0.1:5432/postgres";
 * ```
 */
export const POSTGRES_URL_VARIABLE = "ONCEFLOW_POSTGRES_URL";

/**
 * The connection string in `ONCEFLOW_POSTGRES_URL`, unless the testkit's own global setup exported it.
 *
 * @example
 * ```ts
 * postgresUrlFromEnvironment({ ONCEFLOW_POSTGRES_URL: "postgresql://u@h:5432/db" });
 * ```
 */
export function postgresUrlFromEnvironment(env: NodeJS.ProcessEnv): string | undefined {
  return userProvided(env, POSTGRES_URL_VARIABLE, SHARED_MARKERS.postgres);
}

/**
 * Whether the environment names a server. Pure: it does not connect.
 *
 * @example
 * ```ts
 * probePostgresEnvironment(process.env).available;
 * ```
 */
export function probePostgresEnvironment(env: NodeJS.ProcessEnv): ProbeResult {
  const url = postgresUrlFromEnvironment(env);
  return {
    provider: "environment",
    available: Boolean(url),
    detail: url
      ? `${POSTGRES_URL_VARIABLE} is set`
      : `${POSTGRES_URL_VARIABLE} is not set (or names the run's shared server)`,
    remedy:
      `set ${POSTGRES_URL_VARIABLE}=postgresql://user:password@host:port/db to a running server ` +
      "(with max_prepared_transactions ≥ 64, as a role that may create tables)",
  };
}

/**
 * Uses the server named by `ONCEFLOW_POSTGRES_URL`. It must answer and have at least the asked
 * `max_prepared_transactions`; restart throws (the testkit does not own it); stop only forgets it.
 *
 * @example
 * ```ts
 * const pg = await useEnvironmentPostgres(process.env.ONCEFLOW_POSTGRES_URL!, 64, 30_000);
 * ```
 */
export async function useEnvironmentPostgres(
  connectionString: string,
  wantPrepared: number,
  timeoutMs: number,
): Promise<PostgresService> {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch (error) {
    throw serviceUnavailable(
      `${POSTGRES_URL_VARIABLE} is not a URL (postgresql://user@host:port/db)`,
      {},
      error,
    );
  }
  const ready = await waitUntilPostgresAccepts(connectionString, timeoutMs);
  if ("problem" in ready) {
    throw serviceUnavailable(
      `${POSTGRES_URL_VARIABLE} names a server at ${url.host} that does not accept connections: ${ready.problem}. ` +
        `Start it, or unset ${POSTGRES_URL_VARIABLE} to let the testkit start one.`,
      { host: url.host },
    );
  }
  if (ready.maxPreparedTransactions < wantPrepared) {
    throw serviceUnavailable(
      `${POSTGRES_URL_VARIABLE} names a server with max_prepared_transactions=${ready.maxPreparedTransactions}, ` +
        `but the tests need ${wantPrepared} for two-phase commit: set it in postgresql.conf and restart the ` +
        `server, or unset ${POSTGRES_URL_VARIABLE} to let the testkit start one.`,
      { host: url.host, maxPreparedTransactions: ready.maxPreparedTransactions },
    );
  }
  return {
    connectionString,
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username),
    database: decodeURIComponent(url.pathname.replace(/^\//, "")) || decodeURIComponent(url.username),
    provider: "environment",
    version: ready.version,
    maxPreparedTransactions: ready.maxPreparedTransactions,
    walLevel: ready.walLevel,
    pid: undefined,
    workDir: undefined,
    restart: () =>
      Promise.reject(faultInjectionUnsupported("PostgreSQL", "restart()", POSTGRES_URL_VARIABLE)),
    stop: () => Promise.resolve(),
  };
}
