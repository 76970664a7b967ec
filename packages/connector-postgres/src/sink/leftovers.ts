import { tableName } from "../sql/identifiers.js";
import type { EpochBump } from "./control-tables.js";
import { rollbackPrepared } from "./prepared-mode.js";
import type { SinkSetup } from "./sink-mode.js";
import { stageTablePrefix, stageTablesPrefix } from "./staging-mode.js";

/**
 * Rolls back the prepared transactions and drops the staging tables that earlier attempts left for
 * `subtask` of this sink: under the prefixes `<sinkId>-<subtask>-` (gids) and
 * `onceflow_stage_<hash>_<subtask>_` (tables), of every epoch before `bump.epoch` except those that
 * newer incarnations started (`bump.epochsOfNewerIncarnations`). Runs after the restored
 * checkpoint's transactions were committed, so nothing of an older attempt found here can still be
 * needed, and after this attempt's epoch bump, which waited for any prepare still in flight.
 *
 * Why not everything: this attempt may be a zombie (frozen after its incarnation claim). If its
 * bump came after a newer process's, what that process prepared may be in its stored checkpoint;
 * if its cleanup runs after a newer process bumped the epoch again, that process's epochs are
 * later than this one's. Rolling either back would lose rows. The newer process is fenced by the
 * epochs instead (it restarts), and its next attempt restores and commits them.
 *
 * @example
 * ```ts
 * await rollBackLeftovers(setup, 0, setup.bump);
 * ```
 */
export async function rollBackLeftovers(setup: SinkSetup, subtask: number, bump: EpochBump): Promise<void> {
  const pool = setup.pool.pool;
  const prefix = `${setup.sinkId}-${subtask}-`;
  const leftovers = await pool.query<{ gid: string; here: boolean }>(
    `SELECT gid, database = current_database() AS here FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1`,
    [prefix],
  );
  const kept: string[] = [];
  const ours = (name: string, epochAt: number): boolean => {
    const olderAttempt = isOlderAttempt(epochOf(name, epochAt), bump);
    if (!olderAttempt) kept.push(name);
    return olderAttempt;
  };
  const here = leftovers.rows.filter((row) => row.here && ours(row.gid, prefix.length)).map((row) => row.gid);
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
  const tablePrefix = stageTablePrefix(setup.sinkId, subtask);
  const stages = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'r' AND left(c.relname, length($2)) = $2`,
    [setup.schema, tablePrefix],
  );
  for (const { name } of stages.rows) {
    if (!ours(name, tablePrefix.length)) continue;
    setup.logger.info({ table: name, subtask }, "dropping a staging table left by an earlier attempt");
    await pool.query(`DROP TABLE IF EXISTS ${tableName(setup.schema, name).sql}`);
  }
  if (kept.length > 0) {
    setup.logger.warn(
      { kept, subtask, epoch: bump.epoch, epochsOfNewerIncarnations: bump.epochsOfNewerIncarnations },
      "kept the prepared transactions and staging tables of epochs that newer incarnations started: this process is a zombie of an older incarnation (the checkpoint storage stops it; the newer process restarts, restores and commits what its checkpoint holds, and rolls back the rest)",
    );
  }
}

/**
 * Whether a leftover of `epoch` belongs to an attempt older than the one that made `bump`: an earlier
 * epoch, not started by a newer incarnation. A name without a readable epoch (`undefined`) is old.
 *
 * @example
 * ```ts
 * isOlderAttempt(6, { epoch: 8, epochsOfNewerIncarnations: [] }); // true
 * isOlderAttempt(9, { epoch: 8, epochsOfNewerIncarnations: [] }); // false: a newer process bumped after this attempt
 * isOlderAttempt(7, { epoch: 8, epochsOfNewerIncarnations: [{ from: 7, to: 7 }] }); // false: this attempt is the zombie
 * ```
 */
export function isOlderAttempt(epoch: number | undefined, bump: EpochBump): boolean {
  if (epoch === undefined) return true;
  return (
    epoch < bump.epoch &&
    !bump.epochsOfNewerIncarnations.some((span) => span.from <= epoch && epoch <= span.to)
  );
}

/** The epoch in a gid (`<sinkId>-<subtask>-<epoch>-<checkpointId>`) or staging table name (`…_<subtask>_<epoch>_<sequence>`), read from `at`. */
function epochOf(name: string, at: number): number | undefined {
  const match = /^(\d+)[-_]\d+$/.exec(name.slice(at));
  return match === null ? undefined : Number(match[1]);
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
