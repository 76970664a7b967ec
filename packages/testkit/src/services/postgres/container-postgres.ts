import { serviceUnavailable } from "../../errors/service-errors.js";
import { findFreePort } from "../../runtime/free-port.js";
import { controlContainer } from "../providers/container-control.js";
import { loadPostgresContainerModule } from "../providers/testcontainers-loader.js";
import { waitUntilPostgresAccepts } from "./postgres-readiness.js";
import type { PostgresService } from "./postgres-service.js";

/**
 * The image the container provider starts when neither the `image` option nor `ONCEFLOW_POSTGRES_IMAGE` names one.
 *
 * @example
 * ```ts
 * DEFAULT_POSTGRES_IMAGE; // "postgres:17-alpine"
 * ```
 */
export const DEFAULT_POSTGRES_IMAGE = "postgres:17-alpine";

/**
 * Options of {@link startContainerPostgres}.
 *
 * @example
 * ```ts
 * const options: ContainerPostgresOptions = { image: "postgres:16-alpine", maxPreparedTransactions: 64, startTimeoutMs: 120_000 };
 * ```
 */
export interface ContainerPostgresOptions {
  image?: string;
  maxPreparedTransactions: number;
  startTimeoutMs: number;
  /** "logical" for logical replication; the image's default otherwise. */
  walLevel?: "replica" | "logical";
}

/**
 * Starts PostgreSQL in a container (testcontainers) with `-c max_prepared_transactions=<n>`. The host
 * port is fixed at a free port picked at runtime so that it survives restarts.
 *
 * @example
 * ```ts
 * const pg = await startContainerPostgres({ maxPreparedTransactions: 64, startTimeoutMs: 120_000 });
 * ```
 */
export async function startContainerPostgres(options: ContainerPostgresOptions): Promise<PostgresService> {
  const { PostgreSqlContainer } = await loadPostgresContainerModule();
  const image = options.image ?? DEFAULT_POSTGRES_IMAGE;
  const port = await findFreePort();
  const started = await new PostgreSqlContainer(image)
    .withUsername("postgres")
    .withPassword("postgres")
    .withDatabase("postgres")
    .withExposedPorts({ container: 5432, host: port })
    .withCommand([
      "postgres",
      "-c",
      `max_prepared_transactions=${options.maxPreparedTransactions}`,
      "-c",
      "fsync=off",
      ...(options.walLevel === "logical"
        ? ["-c", "wal_level=logical", "-c", "max_replication_slots=32"]
        : []),
    ])
    .withStartupTimeout(options.startTimeoutMs)
    .start();
  const control = await controlContainer(started);
  const host = started.getHost();
  const connectionString = `postgresql://postgres:postgres@${host}:${port}/postgres`;

  const waitReady = async () => {
    const ready = await waitUntilPostgresAccepts(connectionString, options.startTimeoutMs);
    if ("problem" in ready) {
      throw serviceUnavailable(
        `PostgreSQL container ${image} at ${host}:${port} does not accept connections: ${ready.problem}\n` +
          `--- container log tail ---\n${await control.logTail()}`,
        { image },
      );
    }
    return ready;
  };
  let facts: Awaited<ReturnType<typeof waitReady>>;
  try {
    facts = await waitReady();
  } catch (error) {
    await control.remove();
    throw error;
  }
  return {
    connectionString,
    host,
    port,
    user: "postgres",
    database: "postgres",
    provider: "testcontainers",
    version: facts.version,
    maxPreparedTransactions: facts.maxPreparedTransactions,
    walLevel: facts.walLevel,
    pid: undefined,
    workDir: undefined,
    async restart(restartOptions = {}) {
      // SIGQUIT is PostgreSQL's immediate shutdown (a crash, recovery on start); SIGINT its fast one.
      await control.kill(restartOptions.immediate === true ? "SIGQUIT" : "SIGINT");
      await control.start();
      await waitReady();
    },
    async stop() {
      await started.stop({ timeout: 20_000 }).catch(() => {});
      await control.remove();
    },
  };
}
