import { silentLogger } from "@onceflow/core";
import type pg from "pg";
import { asConfigurationProblem } from "../errors/permanent-errors.js";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { tableName } from "../sql/identifiers.js";
import { openPool, type PostgresConnectionOptions, withClient } from "../sql/pool.js";

/**
 * Where the sinks' control tables are: every `PostgresSink` registers its id in the epoch table at
 * each start (and in the marker table at each commit).
 *
 * @example
 * ```ts
 * const where: PostgresControlTablesOptions = { controlSchema: "ops", epochTable: "onceflow_sink_epochs" };
 * ```
 */
export interface PostgresControlTablesOptions {
  /** The sinks' `controlSchema` (else the target's schema). Default `public`. */
  readonly controlSchema?: string;
  /** The sinks' `markerTable`. Default `onceflow_sink_markers`. */
  readonly markerTable?: string;
  /** The sinks' `epochTable`. Default `onceflow_sink_epochs`. */
  readonly epochTable?: string;
}

/**
 * A sink id registered in the control tables, with what they know of it.
 *
 * @example
 * ```ts
 * const sink: PostgresSinkIdInfo = { sinkId: "orders.out", subtasks: 3, newestEpoch: 12 };
 * ```
 */
export interface PostgresSinkIdInfo {
  readonly sinkId: string;
  /** How many subtasks of the sink ever started. */
  readonly subtasks: number;
  /** The highest epoch (attempt start) of any of its subtasks; undefined when only markers name it. */
  readonly newestEpoch: number | undefined;
}

const DEFAULT_CONTROL_SCHEMA = "public";
const DEFAULT_MARKER_TABLE = "onceflow_sink_markers";
const DEFAULT_EPOCH_TABLE = "onceflow_sink_epochs";

/**
 * Lists the sink ids that `PostgresSink`s registered in the control tables of the connected
 * database (sorted): the ids `listPostgresSinkTransactions` and `onceflow-postgres` accept. Read-only.
 *
 * @example
 * ```ts
 * const sinks = await listPostgresSinkIds({ connection: "postgresql://app@db/app" });
 * console.log(sinks.map((sink) => sink.sinkId)); // ["events_to_pg.out_fec4c1"]
 * ```
 */
export async function listPostgresSinkIds(
  options: PostgresConnectionOptions & PostgresControlTablesOptions,
): Promise<PostgresSinkIdInfo[]> {
  const handle = openPool(options, silentLogger);
  try {
    return await withClient(handle.pool, (client) => registeredSinkIds(client, options));
  } catch (error) {
    throw asConfigurationProblem(error, options.pool === undefined ? "connection" : "pool") ?? error;
  } finally {
    await handle.close();
  }
}

/** The sink ids of the epoch and marker tables; none when neither table exists. */
export async function registeredSinkIds(
  client: pg.ClientBase,
  options: PostgresControlTablesOptions,
): Promise<PostgresSinkIdInfo[]> {
  const { epochs, markers } = controlTablesOf(options);
  const [epochsExist, markersExist] = await Promise.all(
    [epochs, markers].map(
      async (table) =>
        (await client.query<{ oid: string | null }>("SELECT to_regclass($1)::text AS oid", [table.sql]))
          .rows[0]?.oid != null,
    ),
  );
  const found = new Map<string, PostgresSinkIdInfo>();
  if (epochsExist) {
    const rows = await client.query<{ sink_id: string; subtasks: string; epoch: string }>(
      `SELECT sink_id, count(*)::text AS subtasks, max(epoch)::text AS epoch FROM ${epochs.sql} GROUP BY sink_id`,
    );
    for (const row of rows.rows) {
      found.set(row.sink_id, {
        sinkId: row.sink_id,
        subtasks: Number(row.subtasks),
        newestEpoch: Number(row.epoch),
      });
    }
  }
  if (markersExist) {
    const rows = await client.query<{ sink_id: string; subtasks: string }>(
      `SELECT sink_id, count(DISTINCT subtask)::text AS subtasks FROM ${markers.sql} GROUP BY sink_id`,
    );
    for (const row of rows.rows) {
      if (!found.has(row.sink_id)) {
        found.set(row.sink_id, {
          sinkId: row.sink_id,
          subtasks: Number(row.subtasks),
          newestEpoch: undefined,
        });
      }
    }
  }
  return [...found.values()].sort((a, b) => a.sinkId.localeCompare(b.sinkId));
}

/**
 * Throws `UNKNOWN_SINK_ID` when no sink registered `sinkId`: a plausible but wrong id must not
 * read as "nothing left over". The message lists the registered ids.
 */
export async function requireRegisteredSinkId(
  client: pg.ClientBase,
  sinkId: string,
  options: PostgresControlTablesOptions,
): Promise<void> {
  const known = await registeredSinkIds(client, options);
  if (known.some((sink) => sink.sinkId === sinkId)) return;
  const { epochs } = controlTablesOf(options);
  const database = (await client.query<{ db: string }>("SELECT current_database() AS db")).rows[0]?.db;
  const listing =
    known.length === 0
      ? `no PostgresSink registered any id in ${epochs.sql} of database ${database ?? "?"}: check the connection, the sinks' controlSchema (--control-schema) and epochTable (--epoch-table)`
      : `the ids registered in ${epochs.sql} of database ${database ?? "?"} are ${known.map((sink) => sink.sinkId).join(", ")}`;
  throw new PostgresConfigurationError(
    "sinkId",
    PostgresErrorReason.unknownSinkId,
    `no PostgresSink registered the sink id "${sinkId}", so nothing can be said about its transactions; ${listing}. A sink's id is its sinkId option, else <jobId>.<operator uid> with every character other than a letter, a digit, "_", "." or ":" replaced by "_" and a hash of the original appended (job "events-to-pg", uid "out" → events_to_pg.out_<6 hex digits>)`,
  );
}

function controlTablesOf(options: PostgresControlTablesOptions) {
  const schema = options.controlSchema ?? DEFAULT_CONTROL_SCHEMA;
  return {
    epochs: tableName(schema, options.epochTable ?? DEFAULT_EPOCH_TABLE),
    markers: tableName(schema, options.markerTable ?? DEFAULT_MARKER_TABLE),
  };
}
