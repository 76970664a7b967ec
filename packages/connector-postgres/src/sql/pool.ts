import type { Logger } from "@onceflow/core";
import type pg from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { loggableError } from "./pg-errors.js";
import { pgDriver } from "./pg-loader.js";

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
  /** Ends an owned pool; on a borrowed one, removes the error listener onceflow added. Never throws. */
  close(): Promise<void>;
}

/**
 * Resolves {@link PostgresConnectionOptions} into a pool, checking exactly one of the two is given.
 * A pool made from `connection` is made when `pool` is first read.
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
  // An idle connection that the server drops (restart, failover) must not crash the process. Only
  // the error's name, message and code are logged: the error can reach the client, which holds the
  // password and the backend's secret key.
  const onIdleError = (error: Error) =>
    logger.warn(
      { error: loggableError(error) },
      "an idle PostgreSQL connection failed; the pool replaces it",
    );
  if (options.pool !== undefined) {
    const pool = options.pool;
    // A borrowed pool without a listener would crash the process on such an error: add one for as
    // long as onceflow uses the pool, and leave a pool that has its own alone.
    const added = pool.listenerCount("error") === 0;
    if (added) pool.on("error", onIdleError);
    return {
      pool,
      owned: false,
      where: describePool(pool.options),
      close: async () => {
        if (added) pool.off("error", onIdleError);
      },
    };
  }
  const config: pg.PoolConfig = {
    max: 4,
    ...(typeof options.connection === "string"
      ? { connectionString: options.connection }
      : options.connection),
  };
  // Made on first use, and pg loaded with it: a storage built where it is never used (the main
  // thread of a job in worker threads) loads no driver.
  let pool: pg.Pool | undefined;
  let ended: Promise<void> | undefined;
  return {
    get pool(): pg.Pool {
      if (pool === undefined) {
        if (ended !== undefined) throw new Error("Cannot use a pool after calling end on the pool");
        pool = new (pgDriver().Pool)(config);
        pool.on("error", onIdleError);
      }
      return pool;
    },
    owned: true,
    where: describePool(config),
    close: () => {
      ended ??= pool === undefined ? Promise.resolve() : pool.end().catch(() => undefined);
      return ended;
    },
  };
}

/**
 * Runs `work` with a connection of the pool that has an `error` listener for as long as it is
 * checked out: pg-pool listens only to idle connections, and a checked-out one that loses its
 * server (crash, restart, `pg_terminate_backend`) emits `error` — with no listener, Node ends the
 * process. The error fails `work` instead (its query rejects too). A connection whose work failed
 * is discarded, not returned to the pool.
 *
 * @example
 * ```ts
 * const count = await withClient(pool, async (client) => (await client.query("SELECT 1")).rowCount);
 * ```
 */
export async function withClient<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost ??= error;
  };
  const client = await connectListening(pool, onError);
  let failed = false;
  try {
    // Lost between the hand-over and now (see connectListening): its own error, not "not queryable".
    if (lost !== undefined) throw lost;
    const result = await work(client);
    if (lost !== undefined) throw lost;
    return result;
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    client.off("error", onError);
    client.release(failed || lost !== undefined ? true : undefined);
  }
}

/**
 * Checks a connection out of the pool with `onError` listening from the moment the pool hands it
 * over. `await pool.connect()` leaves a gap: pg-pool removes its idle listener as it hands a
 * connection out, and the awaiting caller resumes only after the rest of the current socket read is
 * parsed. When a new connection's ReadyForQuery and a FATAL (57P01 from `pg_terminate_backend` or a
 * shutdown) arrive in one read, the error is emitted with no listener and Node ends the process.
 * The callback form runs in the same tick as the hand-over.
 *
 * @example
 * ```ts
 * const client = await connectListening(pool, (error) => (lost ??= error));
 * ```
 */
export function connectListening(pool: pg.Pool, onError: (error: Error) => void): Promise<pg.PoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((error, client) => {
      if (client === undefined) {
        reject(error ?? new Error("pg-pool handed out no connection"));
        return;
      }
      client.on("error", onError);
      resolve(client);
    });
  });
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
