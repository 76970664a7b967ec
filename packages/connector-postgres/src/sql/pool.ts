import type { Logger } from "@onceflow/core";
import pg from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";

/**
 * Where to connect: a `pg` Pool you own (it is not ended by onceflow), or connection settings (a
 * connection string or `pg.PoolConfig`) from which onceflow makes and ends its own pool.
 *
 * @example
 * ```ts
 * const a: PostgresConnectionOptions = { pool: new pg.Pool({ connectionString }) };
 * const b: PostgresConnectionOptions = { connection: "postgresql://app@db:5432/app" };
 * ```
 */
export interface PostgresConnectionOptions {
  /** A pool to borrow connections from. Needs room for at least 2 connections per sink subtask. */
  readonly pool?: pg.Pool;
  /** Settings for a pool onceflow creates (and ends on close). */
  readonly connection?: string | pg.PoolConfig;
}

/** A pool and whether onceflow must end it. */
export interface PoolHandle {
  readonly pool: pg.Pool;
  readonly owned: boolean;
  /** `host:port/database`, for messages. */
  readonly where: string;
}

/**
 * Resolves {@link PostgresConnectionOptions} into a pool, checking exactly one of the two is given.
 *
 * @example
 * ```ts
 * const { pool, owned } = openPool({ connection: process.env.DATABASE_URL }, logger, "sink");
 * ```
 */
export function openPool(options: PostgresConnectionOptions, logger: Logger, settingPrefix = ""): PoolHandle {
  if ((options.pool === undefined) === (options.connection === undefined)) {
    throw new PostgresConfigurationError(
      `${settingPrefix}pool`,
      PostgresErrorReason.invalidOption,
      "give exactly one of 'pool' (a pg.Pool) or 'connection' (a connection string or pg.PoolConfig)",
    );
  }
  if (options.pool !== undefined) {
    return { pool: options.pool, owned: false, where: describePool(options.pool.options) };
  }
  const config: pg.PoolConfig =
    typeof options.connection === "string"
      ? { connectionString: options.connection }
      : { ...options.connection };
  const pool = new pg.Pool({ max: 4, ...config });
  // An idle connection that the server drops (restart, failover) must not crash the process.
  pool.on("error", (error) => logger.warn({ err: error }, "an idle PostgreSQL connection failed"));
  return { pool, owned: true, where: describePool(pool.options) };
}

function describePool(config: pg.PoolConfig): string {
  if (config.connectionString !== undefined) {
    try {
      const url = new URL(config.connectionString);
      return `${url.hostname}:${url.port || "5432"}${url.pathname}`;
    } catch {
      return "postgresql";
    }
  }
  return `${config.host ?? process.env.PGHOST ?? "localhost"}:${config.port ?? process.env.PGPORT ?? 5432}/${config.database ?? process.env.PGDATABASE ?? ""}`;
}
