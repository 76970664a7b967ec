import { tableName } from "../sql/identifiers.js";
import { rollbackPrepared } from "./prepared-mode.js";
import type { SinkSetup } from "./sink-mode.js";
import { stageTablePrefix, stageTablesPrefix } from "./staging-mode.js";

/**
 * Rolls back every prepared transaction and drops every staging table that earlier attempts left
 * for `subtask` of this sink: everything under the prefixes `<sinkId>-<subtask>-` (gids) and
 * `onceflow_stage_<hash>_<subtask>_` (tables), whatever the epoch. Runs after the restored
 * checkpoint's transactions were committed, so nothing found here can still be needed, and after
 * this attempt's epoch bump, which waited for any prepare still in flight.
 *
 * @example
 * ```ts
 * await rollBackLeftovers(setup, 0);
 * ```
 */
export async function rollBackLeftovers(setup: SinkSetup, subtask: number): Promise<void> {
  const pool = setup.pool.pool;
  const prefix = `${setup.sinkId}-${subtask}-`;
  const leftovers = await pool.query<{ gid: string; here: boolean }>(
    `SELECT gid, database = current_database() AS here FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1`,
    [prefix],
  );
  const here = leftovers.rows.filter((row) => row.here).map((row) => row.gid);
  const elsewhere = leftovers.rows.filter((row) => !row.here).map((row) => row.gid);
  if (elsewhere.length > 0) {
    setup.logger.warn(
      { gids: elsewhere },
      "prepared transactions with this sink's gid prefix exist in another database; they cannot be rolled back from here (two sinks sharing a sinkId?)",
    );
  }
  if (here.length > 0) {
    setup.logger.info(
      { gids: here, subtask },
      "rolling back prepared transactions left by an earlier attempt",
    );
    await rollbackPrepared(setup, here);
  }
  const stages = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'r' AND left(c.relname, length($2)) = $2`,
    [setup.schema, stageTablePrefix(setup.sinkId, subtask)],
  );
  for (const { name } of stages.rows) {
    setup.logger.info({ table: name, subtask }, "dropping a staging table left by an earlier attempt");
    await pool.query(`DROP TABLE IF EXISTS ${tableName(setup.schema, name).sql}`);
  }
}

/**
 * The subtask indexes that left prepared transactions or staging tables of this sink, also those of
 * a larger parallelism that no restored checkpoint tells about (a deployment that never completed a
 * checkpoint before it was rescaled, for example).
 *
 * @example
 * ```ts
 * const old = (await subtasksWithLeftovers(setup)).filter((subtask) => subtask >= parallelism);
 * ```
 */
export async function subtasksWithLeftovers(setup: SinkSetup): Promise<number[]> {
  const pool = setup.pool.pool;
  const gidPrefix = `${setup.sinkId}-`;
  const gids = await pool.query<{ gid: string }>(
    `SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND left(gid, length($1)) = $1`,
    [gidPrefix],
  );
  const tablePrefix = stageTablesPrefix(setup.sinkId);
  const tables = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'r' AND left(c.relname, length($2)) = $2`,
    [setup.schema, tablePrefix],
  );
  const subtasks = new Set<number>();
  // The subtask follows the prefix directly, in every gid and table name format so far.
  for (const { gid } of gids.rows) {
    const match = /^(\d+)-/.exec(gid.slice(gidPrefix.length));
    if (match !== null) subtasks.add(Number(match[1]));
  }
  for (const { name } of tables.rows) {
    const match = /^(\d+)_/.exec(name.slice(tablePrefix.length));
    if (match !== null) subtasks.add(Number(match[1]));
  }
  return [...subtasks].sort((left, right) => left - right);
}
