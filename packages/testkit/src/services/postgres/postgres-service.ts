import type { ServiceWriter } from "../../runtime/announce.js";
import type { ProviderKind } from "../providers/provider-selection.js";

/**
 * A running PostgreSQL server for tests, whatever provides it. Connect as a superuser with
 * `connectionString`; every test should create its own tables (or schema).
 *
 * @example
 * ```ts
 * const pg = await startPostgres();
 * const client = new pg.Client({ connectionString: pg.connectionString });
 * ```
 */
export interface PostgresService {
  /** `postgresql://user[:password]@host:port/database`. */
  readonly connectionString: string;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  readonly provider: ProviderKind;
  /** Server version, e.g. "15.14". */
  readonly version: string;
  /** The server's `max_prepared_transactions`. */
  readonly maxPreparedTransactions: number;
  /** The server's `wal_level` ("replica", or "logical" when started with `walLevel: "logical"`). */
  readonly walLevel: string;
  /** The postmaster's process id (local provider only; it changes on restart). */
  readonly pid: number | undefined;
  /** The temporary folder with the data directory, socket and log (local provider only). */
  readonly workDir: string | undefined;
  /**
   * Restarts the server on the same data and port. `immediate: true` is a crash (`pg_ctl -m immediate`:
   * no checkpoint, recovery on start); otherwise a fast shutdown. Open connections are dropped.
   */
  restart(options?: { immediate?: boolean }): Promise<void>;
  /** Stops the server (nothing left running) and deletes its data. */
  stop(): Promise<void>;
}

/**
 * Options of `startPostgres`.
 *
 * @example
 * ```ts
 * const pg = await startPostgres({ maxPreparedTransactions: 0, faultInjection: true });
 * ```
 */
export interface StartPostgresOptions {
  /** `max_prepared_transactions`; default 64. 0 starts a server without two-phase commit. */
  maxPreparedTransactions?: number;
  /**
   * `wal_level`; default the server's own (PostgreSQL's default is "replica"). "logical" starts a
   * private server that can do logical replication (change data capture); a server that cannot is
   * a `SERVICE_UNAVAILABLE` error that says so.
   */
  walLevel?: "replica" | "logical";
  /** Use only this provider instead of trying environment → testcontainers → local. */
  provider?: ProviderKind;
  /** This test restarts the server: skip `ONCEFLOW_POSTGRES_URL` and start a private one. */
  faultInjection?: boolean;
  /** How long to wait for the server to accept connections. Default 120 s. */
  startTimeoutMs?: number;
  /** Where the "which provider/version" line goes; default stderr. */
  writer?: ServiceWriter;
  /**
   * The container image for the testcontainers provider; default `ONCEFLOW_POSTGRES_IMAGE`, else
   * `postgres:17-alpine`. It must take the official image's POSTGRES_* variables and `-c` arguments.
   */
  image?: string;
  /** The unprivileged OS user that runs the local server when the tests run as root; default "postgres". */
  osUser?: string;
  /** How long the Docker-engine probe may take. Default 15 s. */
  dockerProbeTimeoutMs?: number;
  /**
   * How long pulling a missing image may take before the container provider counts as unavailable
   * (the next provider is tried unless one is pinned). Default 300 s.
   */
  imagePullTimeoutMs?: number;
  /** The environment to read variables from; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}
