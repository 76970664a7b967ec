import { type Logger, silentLogger } from "@onceflow/core";
import type pg from "pg";
import { asConfigurationProblem } from "../errors/permanent-errors.js";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { checkSinkId } from "../sink/options-check.js";
import { stageTablesPrefix } from "../sink/staging-mode.js";
import { literal, tableName } from "../sql/identifiers.js";
import { SqlState, sqlState } from "../sql/pg-errors.js";
import { pgDriver } from "../sql/pg-loader.js";
import { openPool, type PostgresConnectionOptions, withClient } from "../sql/pool.js";
import { type PostgresControlTablesOptions, requireRegisteredSinkId } from "./registered-sink-ids.js";

/**
 * Which sink's leftovers to look at, and where its marker table is.
 *
 * @example
 * ```ts
 * const options: PostgresSinkTransactionsOptions = { connection: "postgresql://app@db/app", sinkId: "orders.out" };
 * ```
 */
export interface PostgresSinkTransactionsOptions
  extends PostgresConnectionOptions,
    PostgresControlTablesOptions {
  /** The sink's id: its `sinkId` option, else `<jobId>.<operator uid>` (see `defaultSinkId`). */
  readonly sinkId: string;
  /**
   * Only prepared transactions of checkpoints below this id. Staging tables carry no checkpoint id
   * in their name, so with this option none are selected.
   */
  readonly checkpointBelow?: number;
  /** Where to log failures of idle connections. Default: nowhere. */
  readonly logger?: Logger;
}

/**
 * A prepared transaction of the sink (a row of `pg_prepared_xacts`).
 *
 * @example
 * ```ts
 * const info: PostgresPreparedTransactionInfo = { gid: "orders.out-0-3-12", subtask: 0, epoch: 3, checkpointId: 12,
 *   preparedAt: 1764400000000, database: "app", owner: "app", superseded: false };
 * ```
 */
export interface PostgresPreparedTransactionInfo {
  /** `<sinkId>-<subtask>-<epoch>-<checkpoint>` (`<sinkId>-<subtask>-<checkpoint>` in the older form, without an epoch). */
  readonly gid: string;
  readonly subtask: number;
  /** The attempt that prepared it; `undefined` for a gid in the older form, without an epoch. */
  readonly epoch: number | undefined;
  readonly checkpointId: number;
  /** When it was prepared (ms since the epoch). */
  readonly preparedAt: number;
  /** The database it was prepared in: only a session of that database can finish it. */
  readonly database: string;
  /** The role that prepared it (that role or a superuser can finish it). */
  readonly owner: string;
  /** True when no run of the job can still commit it (see {@link rollbackPostgresSinkTransactions}). */
  readonly superseded: boolean;
}

/**
 * A staging table of the sink (staging mode), in the database the connection names.
 *
 * @example
 * ```ts
 * const info: PostgresStagingTableInfo = { schema: "public", table: "onceflow_stage_3f2a9c0d1b7e_0_3_7", subtask: 0,
 *   epoch: 3, sequence: 7, database: "app", bytes: 16384, superseded: false };
 * ```
 */
export interface PostgresStagingTableInfo {
  readonly schema: string;
  readonly table: string;
  readonly subtask: number;
  readonly epoch: number;
  /** The transaction's sequence number within its attempt (not a checkpoint id). */
  readonly sequence: number;
  readonly database: string;
  /** `pg_total_relation_size`. */
  readonly bytes: number;
  /** True when no run of the job can still move its rows (see {@link rollbackPostgresSinkTransactions}). */
  readonly superseded: boolean;
}

/**
 * What a sink left prepared or staged.
 *
 * @example
 * ```ts
 * const { prepared, staging } = await listPostgresSinkTransactions({ connection, sinkId: "orders.out" });
 * ```
 */
export interface PostgresSinkTransactions {
  readonly sinkId: string;
  readonly prepared: readonly PostgresPreparedTransactionInfo[];
  readonly staging: readonly PostgresStagingTableInfo[];
}

/**
 * What {@link rollbackPostgresSinkTransactions} rolls back: everything of the sink (`all`) or the
 * prepared transactions below a checkpoint (`checkpointBelow`) — exactly one of the two — and
 * whether the job is known to be stopped.
 *
 * @example
 * ```ts
 * const options: RollbackPostgresSinkTransactionsOptions = { connection, sinkId: "orders.out", all: true, jobStopped: true };
 * ```
 */
export interface RollbackPostgresSinkTransactionsOptions extends PostgresSinkTransactionsOptions {
  /** Every prepared transaction and staging table of the sink. */
  readonly all?: boolean;
  /**
   * Every process of the job has stopped, and either it ended with its final checkpoint or it will
   * never be restored again (retired): then nothing selected can still be committed. Without it only
   * superseded leftovers are touched.
   */
  readonly jobStopped?: boolean;
  /** Report what would be rolled back and dropped; change nothing. */
  readonly dryRun?: boolean;
}

/**
 * What a rollback did (or, with `dryRun`, would do).
 *
 * @example
 * ```ts
 * const { rolledBack, dropped, kept } = await rollbackPostgresSinkTransactions({ connection, sinkId, all: true });
 * ```
 */
export interface PostgresSinkRollbackResult {
  readonly dryRun: boolean;
  /** Prepared transactions rolled back (or already gone when the rollback ran). */
  readonly rolledBack: readonly PostgresPreparedTransactionInfo[];
  /** Staging tables dropped. */
  readonly dropped: readonly PostgresStagingTableInfo[];
  /** Selected, but left alone: a running job or its next restore may still commit them (no `jobStopped`). */
  readonly kept: PostgresSinkTransactions;
}

const DEFAULT_CONTROL_SCHEMA = "public";
const DEFAULT_MARKER_TABLE = "onceflow_sink_markers";

/**
 * Lists the prepared transactions (`pg_prepared_xacts`, server-wide, with the database each was
 * prepared in) and the staging tables (every schema of the connected database) that a
 * `PostgresSink` left under its sink id, sorted by subtask, epoch and checkpoint. Read-only.
 *
 * Each item says whether it is **superseded**: the sink's marker table holds a commit of the same
 * subtask by a later attempt (a higher epoch). An attempt commits only after its recovery finished —
 * which committed what its restored checkpoint referenced and rolled back everything else of the
 * subtask — so nothing of an older epoch that is still there can be committed by anyone: a
 * zombie's staging table, for example.
 *
 * An id that no sink registered in the control tables, with nothing under it, is an error
 * (`UNKNOWN_SINK_ID`, listing the registered ids; see `listPostgresSinkIds`), never an empty list:
 * a plausible hand-made id must not read as "nothing left over".
 *
 * @throws PostgresConfigurationError `UNKNOWN_SINK_ID` for an id no sink registered.
 * @example
 * ```ts
 * const found = await listPostgresSinkTransactions({ connection: "postgresql://app@db/app", sinkId: "orders.out" });
 * for (const t of found.prepared) console.log(t.gid, new Date(t.preparedAt), t.superseded);
 * ```
 */
export async function listPostgresSinkTransactions(
  options: PostgresSinkTransactionsOptions,
): Promise<PostgresSinkTransactions> {
  checkOptions(options);
  const handle = openPool(options, options.logger ?? silentLogger);
  try {
    return await withClient(handle.pool, (client) => listWith(client, options));
  } catch (error) {
    throw asConfigurationProblem(error, options.pool === undefined ? "connection" : "pool") ?? error;
  } finally {
    await handle.close();
  }
}

/**
 * Rolls back a sink's prepared transactions (`ROLLBACK PREPARED`, each in the database it was
 * prepared in) and drops its staging tables — for what no restart will clean up: a job retired for
 * good, a sink id that changed, a zombie's staging table. A `PostgresSink` cleans its own subtasks'
 * leftovers at every start, so a job that will run again needs none of this.
 *
 * The rule: without `jobStopped` only **superseded** leftovers are touched (see
 * {@link listPostgresSinkTransactions}): a running job, or the restore of its latest checkpoint,
 * may still commit the others — rolling back one of those loses its rows (the job then fails with
 * `TRANSACTION_TIMED_OUT`). Say `jobStopped: true` only when every process of the job has stopped
 * and it either ended with its final checkpoint (`onceflow run` printed `job finished`) or will
 * never be restored again.
 *
 * @throws PostgresConfigurationError `INVALID_OPTION` unless exactly one of `all` and `checkpointBelow` is given;
 *   `UNKNOWN_SINK_ID` for an id no sink registered (see {@link listPostgresSinkTransactions}).
 * @example
 * ```ts
 * const { rolledBack, dropped } = await rollbackPostgresSinkTransactions({
 *   connection: "postgresql://app@db/app", sinkId: "orders.out", all: true, jobStopped: true,
 * });
 * ```
 */
export async function rollbackPostgresSinkTransactions(
  options: RollbackPostgresSinkTransactionsOptions,
): Promise<PostgresSinkRollbackResult> {
  if ((options.all === true) === (options.checkpointBelow !== undefined)) {
    throw new PostgresConfigurationError(
      "all",
      PostgresErrorReason.invalidOption,
      "say what to roll back: 'all' (every prepared transaction and staging table of the sink) or 'checkpointBelow' (prepared transactions of checkpoints below it), not both",
    );
  }
  checkOptions(options);
  const handle = openPool(options, options.logger ?? silentLogger);
  try {
    const found = await withClient(handle.pool, (client) => listWith(client, options));
    const touch = <T extends { superseded: boolean }>(item: T) =>
      options.jobStopped === true || item.superseded;
    const prepared = found.prepared.filter(touch);
    const staging = found.staging.filter(touch);
    const kept: PostgresSinkTransactions = {
      sinkId: found.sinkId,
      prepared: found.prepared.filter((item) => !touch(item)),
      staging: found.staging.filter((item) => !touch(item)),
    };
    const dryRun = options.dryRun === true;
    if (!dryRun) {
      const elsewhere = await withClient(handle.pool, async (client) => {
        const byDatabase = groupBy(prepared, (item) => item.database);
        const here = (await client.query<{ db: string }>("SELECT current_database() AS db")).rows[0]!.db;
        await rollBackGids(client, byDatabase.get(here) ?? []);
        for (const table of staging) {
          await client.query(`DROP TABLE IF EXISTS ${tableName(table.schema, table.table).sql}`);
        }
        byDatabase.delete(here);
        return byDatabase;
      });
      for (const [database, items] of elsewhere) {
        await inDatabase(options, database, (client) => rollBackGids(client, items));
      }
    }
    return { dryRun, rolledBack: prepared, dropped: staging, kept };
  } catch (error) {
    throw asConfigurationProblem(error, options.pool === undefined ? "connection" : "pool") ?? error;
  } finally {
    await handle.close();
  }
}

function checkOptions(options: PostgresSinkTransactionsOptions): void {
  checkSinkId(options.sinkId);
  const below = options.checkpointBelow;
  if (below !== undefined && !(Number.isSafeInteger(below) && below >= 0)) {
    throw new PostgresConfigurationError(
      "checkpointBelow",
      PostgresErrorReason.invalidOption,
      `must be a whole checkpoint id ≥ 0, got ${below}`,
    );
  }
}

async function listWith(
  client: pg.ClientBase,
  options: PostgresSinkTransactionsOptions,
): Promise<PostgresSinkTransactions> {
  const { sinkId, checkpointBelow } = options;
  const here = (await client.query<{ db: string }>("SELECT current_database() AS db")).rows[0]!.db;
  const gidPrefix = `${sinkId}-`;
  const gids = await client.query<{ gid: string; prepared: Date; owner: string; database: string }>(
    `SELECT gid, prepared, owner, database FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1`,
    [gidPrefix],
  );
  const parsed = gids.rows.flatMap((row) => {
    const parts = parseGid(row.gid.slice(gidPrefix.length));
    if (parts === undefined) return [];
    if (checkpointBelow !== undefined && !(parts.checkpointId < checkpointBelow)) return [];
    return [
      {
        ...parts,
        gid: row.gid,
        preparedAt: row.prepared.getTime(),
        owner: row.owner,
        database: row.database,
      },
    ];
  });
  // Superseded is judged by the marker table of the database the transaction was prepared in.
  const newestEpochs = new Map<string, Map<number, number>>();
  newestEpochs.set(here, await newestCommittedEpochs(client, options));
  for (const database of new Set(parsed.map((item) => item.database))) {
    if (newestEpochs.has(database)) continue;
    newestEpochs.set(
      database,
      await inDatabase(options, database, (other) => newestCommittedEpochs(other, options)),
    );
  }
  const superseded = (database: string, subtask: number, epoch: number | undefined) => {
    const newest = newestEpochs.get(database)?.get(subtask);
    return newest !== undefined && newest > (epoch ?? 0);
  };
  const prepared: PostgresPreparedTransactionInfo[] = parsed.map((item) => ({
    gid: item.gid,
    subtask: item.subtask,
    epoch: item.epoch,
    checkpointId: item.checkpointId,
    preparedAt: item.preparedAt,
    database: item.database,
    owner: item.owner,
    superseded: superseded(item.database, item.subtask, item.epoch),
  }));
  let staging: PostgresStagingTableInfo[] = [];
  if (checkpointBelow === undefined) {
    const tablePrefix = stageTablesPrefix(sinkId);
    const tables = await client.query<{ schema: string; name: string; bytes: string }>(
      `SELECT n.nspname AS schema, c.relname AS name, pg_total_relation_size(c.oid)::text AS bytes
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = 'r' AND left(c.relname, length($1)) = $1`,
      [tablePrefix],
    );
    staging = tables.rows.flatMap((row) => {
      const match = /^(\d+)_(\d+)_(\d+)$/.exec(row.name.slice(tablePrefix.length));
      if (match === null) return [];
      const [subtask, epoch, sequence] = [Number(match[1]), Number(match[2]), Number(match[3])];
      return [
        {
          schema: row.schema,
          table: row.name,
          subtask,
          epoch,
          sequence,
          database: here,
          bytes: Number(row.bytes),
          superseded: superseded(here, subtask, epoch),
        },
      ];
    });
  }
  prepared.sort(
    (a, b) => a.subtask - b.subtask || (a.epoch ?? 0) - (b.epoch ?? 0) || a.checkpointId - b.checkpointId,
  );
  staging.sort((a, b) => a.subtask - b.subtask || a.epoch - b.epoch || a.sequence - b.sequence);
  // Nothing found under an id no sink registered: a wrong id, never an all-clear.
  if (prepared.length === 0 && staging.length === 0) await requireRegisteredSinkId(client, sinkId, options);
  return { sinkId, prepared, staging };
}

/** `<subtask>-<epoch>-<checkpoint>`, or `<subtask>-<checkpoint>` (the older form, without an epoch). */
function parseGid(
  rest: string,
): { subtask: number; epoch: number | undefined; checkpointId: number } | undefined {
  const match = /^(\d+)-(?:(\d+)-)?(\d+)$/.exec(rest);
  if (match === null) return undefined;
  return {
    subtask: Number(match[1]),
    epoch: match[2] === undefined ? undefined : Number(match[2]),
    checkpointId: Number(match[3]),
  };
}

/** Per subtask, the highest epoch of a committed checkpoint in the sink's marker table. */
async function newestCommittedEpochs(
  client: pg.ClientBase,
  options: PostgresSinkTransactionsOptions,
): Promise<Map<number, number>> {
  const markers = tableName(
    options.controlSchema ?? DEFAULT_CONTROL_SCHEMA,
    options.markerTable ?? DEFAULT_MARKER_TABLE,
  );
  const exists = await client.query<{ oid: string | null }>("SELECT to_regclass($1)::text AS oid", [
    markers.sql,
  ]);
  // No marker table: nothing was ever committed here, so nothing is known to be superseded.
  if (exists.rows[0]?.oid == null) return new Map();
  const rows = await client.query<{ subtask: number; epoch: string }>(
    `SELECT subtask, max(epoch)::text AS epoch FROM ${markers.sql} WHERE sink_id = $1 GROUP BY subtask`,
    [options.sinkId],
  );
  return new Map(rows.rows.map((row) => [row.subtask, Number(row.epoch)]));
}

async function rollBackGids(
  client: pg.ClientBase,
  items: readonly PostgresPreparedTransactionInfo[],
): Promise<void> {
  for (const item of items) {
    try {
      await client.query(`ROLLBACK PREPARED ${literal(item.gid)}`);
    } catch (error) {
      // Finished meanwhile (by the job's own recovery, or another rollback): nothing left to do.
      if (sqlState(error) !== SqlState.undefinedObject) throw error;
    }
  }
}

/**
 * Runs `work` on a connection to `database` of the same server and role: `COMMIT PREPARED` and
 * `ROLLBACK PREPARED` work only in the database the transaction was prepared in.
 */
async function inDatabase<T>(
  options: PostgresConnectionOptions,
  database: string,
  work: (client: pg.ClientBase) => Promise<T>,
): Promise<T> {
  const base: pg.PoolConfig =
    options.pool !== undefined
      ? options.pool.options
      : typeof options.connection === "string"
        ? { connectionString: options.connection }
        : { ...options.connection };
  const client = new (pgDriver().Client)(withDatabase(base, database));
  let lost: Error | undefined;
  client.on("error", (error) => {
    lost ??= error;
  });
  await client.connect();
  try {
    const result = await work(client);
    if (lost !== undefined) throw lost;
    return result;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The same settings with another database (a connection string's database wins over `database`). */
function withDatabase(config: pg.PoolConfig, database: string): pg.ClientConfig {
  const { max: _max, min: _min, idleTimeoutMillis: _idle, ...client } = config;
  if (client.connectionString !== undefined) {
    const url = new URL(client.connectionString);
    url.pathname = `/${encodeURIComponent(database)}`;
    return { ...client, connectionString: url.toString() };
  }
  return { ...client, database };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const name = key(item);
    groups.set(name, [...(groups.get(name) ?? []), item]);
  }
  return groups;
}
