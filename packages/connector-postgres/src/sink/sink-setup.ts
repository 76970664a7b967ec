import type { Logger, RuntimeContext } from "@onceflow/core";
import type { PoolClient } from "pg";
import { asConfigurationProblem } from "../errors/permanent-errors.js";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { columnDisplay } from "../sql/copy-buffer.js";
import { quote, shortHash, tableName } from "../sql/identifiers.js";
import { SqlState, sqlState } from "../sql/pg-errors.js";
import { openPool, type PoolHandle, withClient } from "../sql/pool.js";
import {
  asPermissionError,
  checkColumns,
  checkUniqueIndex,
  readTableSchema,
  type TableSchema,
} from "../sql/table-schema.js";
import { bumpingAttemptOf, ControlTables } from "./control-tables.js";
import type { PostgresSinkMode, PostgresSinkOptions, PostgresSinkTableOptions } from "./options.js";
import { SEQ_COLUMN, type SinkSetup, type TargetTable } from "./sink-mode.js";

/** What {@link startSinkSetup} needs besides the options. */
export interface SinkSetupRequest<IN> {
  readonly options: PostgresSinkOptions<IN>;
  readonly name: string;
  readonly logger: Logger;
  readonly context: RuntimeContext;
  readonly sinkId: string;
  readonly requestedMode: PostgresSinkMode;
  readonly lockTimeout: number;
  readonly markerRetention: number;
}

/**
 * Starts one attempt of a sink subtask: opens the pool, picks the mode, checks the target table,
 * creates the control tables and bumps the epoch (which fences every earlier attempt). A failure
 * ends the pool again. Login, database and privilege errors come back as
 * `PostgresConfigurationError` (never retried).
 *
 * @example
 * ```ts
 * const setup = await startSinkSetup({ options, name: "PostgresSink", logger, context, sinkId, requestedMode: "auto", lockTimeout: 10_000, markerRetention: 100 });
 * ```
 */
export async function startSinkSetup<IN>(request: SinkSetupRequest<IN>): Promise<SinkSetup> {
  const pool = openPool(request.options, request.logger);
  try {
    if (!pool.owned && (pool.pool.options.max ?? 10) < 2) {
      throw new PostgresConfigurationError(
        "pool",
        PostgresErrorReason.invalidOption,
        "needs room for at least 2 connections (one holds the open transaction, one commits)",
      );
    }
    return await withClient(pool.pool, (client) => inspect(request, client, pool));
  } catch (error) {
    await pool.close();
    throw asConfigurationProblem(error, request.options.pool === undefined ? "connection" : "pool") ?? error;
  }
}

async function inspect<IN>(
  request: SinkSetupRequest<IN>,
  client: PoolClient,
  pool: PoolHandle,
): Promise<SinkSetup> {
  const { options, sinkId, context } = request;
  const subtask = context.subtaskIndex;
  const schema = (options as PostgresSinkTableOptions<IN>).schema ?? "public";
  const setting = await client.query<{ value: string }>(
    "SELECT current_setting('max_prepared_transactions') AS value",
  );
  const maxPrepared = Number(setting.rows[0]?.value ?? 0);
  const mode = resolveMode(request, maxPrepared, pool.where);
  const control = new ControlTables(
    options.controlSchema ?? schema,
    options.markerTable ?? "onceflow_sink_markers",
    options.epochTable ?? "onceflow_sink_epochs",
  );
  const target =
    options.table === undefined
      ? undefined
      : await inspectTarget(options, schema, client, mode, sinkId, subtask);
  await control.ensure(client);
  const bump = await control.bumpEpoch(
    client,
    sinkId,
    subtask,
    request.lockTimeout,
    bumpingAttemptOf(context),
  );
  const epoch = bump.epoch;
  const message =
    request.requestedMode === "auto"
      ? `PostgresSink mode 'auto' chose '${mode}' (max_prepared_transactions = ${maxPrepared} on ${pool.where})`
      : `PostgresSink uses mode '${mode}'`;
  request.logger.info({ mode, sinkId, epoch, maxPreparedTransactions: maxPrepared }, message);
  return {
    name: request.name,
    logger: request.logger,
    pool,
    mode,
    sinkId,
    subtask,
    epoch,
    bump,
    control,
    schema,
    lockTimeout: request.lockTimeout,
    markerRetention: request.markerRetention,
    ...(target === undefined ? {} : { target }),
    ...(options.write === undefined
      ? {}
      : { write: options.write as (client: PoolClient, rows: readonly unknown[]) => Promise<void> }),
  };
}

function resolveMode<IN>(
  request: SinkSetupRequest<IN>,
  maxPrepared: number,
  where: string,
): "prepared" | "staging" {
  if (request.requestedMode === "staging") return "staging";
  if (maxPrepared > 0) return "prepared";
  if (request.requestedMode === "auto") {
    if (request.options.write !== undefined) {
      throw new PostgresConfigurationError(
        "write",
        PostgresErrorReason.preparedTransactionsDisabled,
        `the server at ${where} has max_prepared_transactions = 0, so mode 'auto' would use staging, which cannot run a custom write: set max_prepared_transactions > 0 on the server (postgresql.conf or ALTER SYSTEM, then restart it), or give 'table' and 'columns' instead of 'write'`,
      );
    }
    return "staging";
  }
  throw new PostgresConfigurationError(
    "mode",
    PostgresErrorReason.preparedTransactionsDisabled,
    `mode 'prepared' needs prepared transactions, but the server at ${where} has max_prepared_transactions = 0. Either set max_prepared_transactions to at least twice the number of sink subtasks (ALTER SYSTEM SET max_prepared_transactions = 64; then restart PostgreSQL — it cannot change without a restart), or use mode 'staging' (or 'auto', which picks staging on such servers)`,
  );
}

async function inspectTarget<IN>(
  options: PostgresSinkOptions<IN>,
  schemaName: string,
  client: PoolClient,
  mode: "prepared" | "staging",
  sinkId: string,
  subtask: number,
): Promise<TargetTable> {
  const tableOptions = options as PostgresSinkTableOptions<IN>;
  const table = tableName(schemaName, tableOptions.table);
  const operation = tableOptions.operation ?? { type: "insert" };
  const schema = await readTableSchema(
    client,
    table,
    operation.type === "upsert"
      ? ["INSERT", "UPDATE", "SELECT"]
      : mode === "staging"
        ? ["INSERT", "SELECT"]
        : ["INSERT"],
  );
  const columns = tableOptions.columns;
  const infos = checkColumns(schema, columns);
  const encodings = infos.map((info) => info.encoding);
  const displays = infos.map((info) => columnDisplay(info.type));
  const stageConstraints = mode === "staging" ? await stagingConstraints(client, schema, columns) : undefined;
  const base = {
    table,
    columns,
    encodings,
    displays,
    ...(stageConstraints === undefined ? {} : { stageConstraints }),
  };
  if (operation.type !== "upsert") return base;
  await checkUniqueIndex(client, schema, operation.conflictColumns);
  const updateColumns =
    operation.updateColumns ?? columns.filter((column) => !operation.conflictColumns.includes(column));
  const upsert = { conflictColumns: operation.conflictColumns, updateColumns };
  if (mode === "staging") return { ...base, upsert };
  // Created once and kept: dropping it could wait on a prepared transaction that still uses it.
  const scratch = tableName(schemaName, `onceflow_scratch_${shortHash(sinkId)}_${subtask}`);
  try {
    await client.query(
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${scratch.sql} AS SELECT 0::bigint AS ${quote(SEQ_COLUMN)}, ${columns
        .map(quote)
        .join(", ")} FROM ${table.sql} WITH NO DATA`,
    );
  } catch (error) {
    const state = sqlState(error);
    if (state !== SqlState.uniqueViolation && state !== SqlState.duplicateTable) {
      throw asPermissionError(error, "schema", `creating the scratch table ${scratch.sql}`);
    }
  }
  return { ...base, upsert, scratch };
}

/**
 * `ALTER TABLE` clauses that copy onto a staging table the target's NOT NULL columns and its
 * validated CHECK constraints (same names) that involve only written columns, so that a row the
 * target refuses fails when it is staged — where the sink still knows which record it was.
 */
async function stagingConstraints(
  client: PoolClient,
  schema: TableSchema,
  columns: readonly string[],
): Promise<string[]> {
  const clauses = columns
    .filter((column) => schema.columns.get(column)?.notNull === true)
    .map((column) => `ALTER COLUMN ${quote(column)} SET NOT NULL`);
  const checks = await client.query<{ name: string; definition: string; columns: string[] | null }>(
    `SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS definition,
            (SELECT array_agg(a.attname::text) FROM pg_attribute a
              WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)) AS columns
       FROM pg_constraint c
      WHERE c.conrelid = to_regclass($1) AND c.contype = 'c' AND c.convalidated`,
    [schema.table.sql],
  );
  for (const check of checks.rows) {
    const involved = check.columns ?? [];
    if (involved.length > 0 && involved.every((column) => columns.includes(column))) {
      clauses.push(`ADD CONSTRAINT ${quote(check.name)} ${check.definition}`);
    }
  }
  return clauses;
}
