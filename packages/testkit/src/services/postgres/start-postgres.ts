import { ConfigurationError } from "@onceflow/core";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { announceOnce, stderrWriter } from "../../runtime/announce.js";
import { containerProbe, providerFromEnvironment, resolveImage } from "../providers/container-images.js";
import { probeDockerEngine } from "../providers/docker-engine-probe.js";
import { chooseProvider, providerOrder } from "../providers/provider-selection.js";
import { DEFAULT_POSTGRES_IMAGE, startContainerPostgres } from "./container-postgres.js";
import {
  postgresUrlFromEnvironment,
  probePostgresEnvironment,
  useEnvironmentPostgres,
} from "./environment-postgres.js";
import { probeLocalPostgres, type ServerUser, startLocalPostgres } from "./local-postgres.js";
import { loadPg } from "./pg-loader.js";
import type { PostgresBinaries } from "./postgres-binaries.js";
import type { PostgresService, StartPostgresOptions } from "./postgres-service.js";

/**
 * Starts (or finds) a real PostgreSQL server for tests, with `max_prepared_transactions` 64 unless
 * asked otherwise. Providers are tried in order: a server named by `ONCEFLOW_POSTGRES_URL`; a container
 * through testcontainers when a Docker engine answers; a throwaway cluster from the installed server
 * binaries (initdb + pg_ctl, as the "postgres" user when running as root). When none is possible it
 * throws an `OnceflowError` (`SERVICE_UNAVAILABLE`) listing what was tried and what to install; it
 * never skips. The choice is written once per run to `options.writer` (stderr by default).
 *
 * A server without prepared transactions (`maxPreparedTransactions: 0`) is always a private one: the
 * environment's shared server is not used for it.
 *
 * @example
 * ```ts
 * const pg = await startPostgres({ faultInjection: true });
 * await pg.restart({ immediate: true }); // crash and recover
 * await pg.stop();
 * ```
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresService> {
  const env = options.env ?? process.env;
  const maxPrepared = options.maxPreparedTransactions ?? 64;
  if (!Number.isInteger(maxPrepared) || maxPrepared < 0) {
    throw new ConfigurationError("maxPreparedTransactions", `must be an integer ≥ 0, got ${maxPrepared}`);
  }
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  await loadPg(); // an optional peer: say so before starting anything when it is missing
  let local: { binaries: PostgresBinaries; user: ServerUser } | undefined;

  const image = resolveImage("postgres", { option: options.image, env, fallback: DEFAULT_POSTGRES_IMAGE });
  const order = providerOrder({
    provider: options.provider ?? providerFromEnvironment(env),
    faultInjection: options.faultInjection,
    environmentExcludedBecause:
      maxPrepared === 0
        ? "maxPreparedTransactions: 0 needs a private server"
        : options.walLevel === "logical"
          ? 'walLevel: "logical" needs a private server'
          : undefined,
  });
  const decision = await chooseProvider("PostgreSQL", order, {
    environment: async () => probePostgresEnvironment(env),
    testcontainers: containerProbe(() => probeDockerEngine({ timeoutMs: options.dockerProbeTimeoutMs }), {
      service: "postgres",
      image,
      pullTimeoutMs: options.imagePullTimeoutMs,
    }),
    local: async () => {
      const { probe, binaries, user } = await probeLocalPostgres(options.osUser ?? "postgres", env);
      if (binaries !== undefined && user !== undefined) local = { binaries, user };
      return probe;
    },
  });
  if (!decision.ok)
    throw serviceUnavailable(decision.message, { service: "postgres", tried: decision.tried });

  const started = Date.now();
  let service: PostgresService;
  switch (decision.provider) {
    case "environment":
      service = await useEnvironmentPostgres(postgresUrlFromEnvironment(env) ?? "", maxPrepared, 30_000);
      break;
    case "testcontainers":
      service = await startContainerPostgres({
        image,
        maxPreparedTransactions: maxPrepared,
        startTimeoutMs,
        walLevel: options.walLevel,
      });
      break;
    case "local":
      if (local === undefined) throw serviceUnavailable("local PostgreSQL probe gave no binaries");
      service = await startLocalPostgres({
        ...local,
        maxPreparedTransactions: maxPrepared,
        startTimeoutMs,
        walLevel: options.walLevel,
      });
      break;
  }
  if (options.walLevel === "logical" && service.walLevel !== "logical") {
    const walLevel = service.walLevel;
    await service.stop();
    throw serviceUnavailable(
      `PostgreSQL ${service.version} via ${service.provider} cannot do logical replication: it runs with ` +
        `wal_level=${walLevel} although "logical" was asked for. Set wal_level = logical in postgresql.conf ` +
        "(or -c wal_level=logical) and restart the server.",
      { service: "postgres", walLevel },
    );
  }
  announceOnce(
    `postgres|${service.provider}|${service.version}|${service.maxPreparedTransactions}|${service.walLevel}`,
    `onceflow testkit: PostgreSQL ${service.version} via ${service.provider} (${decision.probe.detail}) at ` +
      `${service.host}:${service.port}, max_prepared_transactions=${service.maxPreparedTransactions}, ` +
      `wal_level=${service.walLevel}, ` +
      `ready in ${Date.now() - started} ms`,
    options.writer ?? stderrWriter,
    env,
  );
  return service;
}
