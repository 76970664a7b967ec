import { TransactionError } from "@onceflow/core";
import { asPermanentError } from "../errors/permanent-errors.js";
import { copyChunks } from "../sql/copy-buffer.js";
import { copyText } from "../sql/copy-writer.js";
import { quote, shortHash, tableName } from "../sql/identifiers.js";
import { withClient } from "../sql/pool.js";
import { asPermissionError } from "../sql/table-schema.js";
import { insertMarker, markerEpoch } from "./commit-markers.js";
import {
  type OpenHandle,
  type OutgoingBatch,
  type PostgresTransaction,
  SEQ_COLUMN,
  type SinkMode,
  type SinkSetup,
} from "./sink-mode.js";
import { upsertStatement } from "./upsert-statement.js";

/**
 * The prefix of every staging table of (sink, subtask): `onceflow_stage_<hash of sinkId>_<subtask>_`.
 *
 * @example
 * ```ts
 * stageTablePrefix("orders.out", 0); // "onceflow_stage_d3a2605e5967_0_"
 * ```
 */
export function stageTablePrefix(sinkId: string, subtask: number): string {
  return `${stageTablesPrefix(sinkId)}${subtask}_`;
}

/** The prefix of every staging table of a sink, whatever the subtask. */
export function stageTablesPrefix(sinkId: string): string {
  return `onceflow_stage_${shortHash(sinkId)}_`;
}

/**
 * The staging table of one transaction: the prefix, then the attempt's epoch and the transaction's
 * sequence number, so no later attempt reuses the name.
 *
 * @example
 * ```ts
 * stageTableName("orders.out", 0, 3, 7); // "onceflow_stage_d3a2605e5967_0_3_7"
 * ```
 */
export function stageTableName(sinkId: string, subtask: number, epoch: number, sequence: number): string {
  return `${stageTablePrefix(sinkId, subtask)}${epoch}_${sequence}`;
}

/**
 * Staging mode: each batch is committed at once into the transaction's staging table (which has
 * the target's NOT NULL and CHECK constraints on the written columns); when the checkpoint
 * completes, one ordinary transaction checks the epoch (holding its row in share mode), skips a
 * replay (marker present), moves the rows into the target, writes the marker and drops the
 * staging table. Works on any PostgreSQL.
 *
 * @example
 * ```ts
 * const mode = new StagingMode(setup);
 * await mode.send(txn, handle, batch); // COPY into the staging table
 * await mode.commit(txn); // INSERT INTO target SELECT … FROM staging table
 * ```
 */
export class StagingMode implements SinkMode {
  constructor(private readonly setup: SinkSetup) {}

  async send(txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch): Promise<void> {
    const setup = this.setup;
    const target = setup.target!;
    const stage = tableName(setup.schema, txn.stageTable!);
    try {
      await withClient(setup.pool.pool, async (client) => {
        if (!handle.stageCreated) {
          const seq = target.upsert === undefined ? "" : `0::bigint AS ${quote(SEQ_COLUMN)}, `;
          await client.query("BEGIN");
          await client.query(
            `CREATE TABLE IF NOT EXISTS ${stage.sql} AS SELECT ${seq}${target.columns.map(quote).join(", ")} FROM ${target.table.sql} WITH NO DATA`,
          );
          const constraints = target.stageConstraints ?? [];
          if (constraints.length > 0)
            await client.query(`ALTER TABLE ${stage.sql} ${constraints.join(", ")}`);
          await client.query("COMMIT");
          handle.stageCreated = true;
        }
        if (batch.kind === "copy") await copyText(client, stage, batch.columns, copyChunks(batch.copy));
      });
    } catch (error) {
      // No CREATE privilege on the schema names 'schema'; everything else is classified as usual.
      const permission = asPermissionError(error, "schema", `staging rows in ${stage.sql}`);
      if (permission !== error) throw permission;
      throw asPermanentError(error, "table", {
        table: target.table.sql,
        columns: target.columns,
        ...(batch.kind === "copy" ? { rowAt: batch.rowAt } : {}),
      });
    }
  }

  /** Every batch is already committed into the staging table: nothing else to make durable. */
  async preCommit(): Promise<void> {}

  /** Moves the staged rows into the target in one transaction (see the class). */
  async commit(txn: PostgresTransaction): Promise<void> {
    if (txn.rows === 0 || txn.stageTable === undefined) return;
    const setup = this.setup;
    const checkpointId = txn.checkpointId ?? -1;
    const target = setup.target!;
    const stage = tableName(setup.schema, txn.stageTable);
    await withClient(setup.pool.pool, async (client) => {
      try {
        await client.query("BEGIN");
        await client.query(`SET LOCAL lock_timeout = ${setup.lockTimeout}`);
        await setup.control.checkEpoch(client, setup.sinkId, setup.subtask, setup.epoch, checkpointId, true);
        const epoch = await markerEpoch(setup, client, txn);
        if (epoch === txn.epoch) {
          // A replay: moved before the crash. Only the staging table may be left.
          await client.query(`DROP TABLE IF EXISTS ${stage.sql}`);
          await client.query("COMMIT");
          return;
        }
        if (epoch !== undefined) {
          throw new TransactionError(
            "TRANSACTION_FENCED",
            `${setup.name}: checkpoint ${checkpointId} of sink "${txn.sinkId}" subtask ${txn.subtask} was already committed by another attempt (epoch ${epoch}, these rows were staged in epoch ${txn.epoch}); restart so that the job restores the latest checkpoint`,
            { checkpointId, transactionId: txn.stageTable },
          );
        }
        const exists = await client.query<{ oid: string | null }>("SELECT to_regclass($1)::text AS oid", [
          stage.sql,
        ]);
        if (exists.rows[0]?.oid == null) {
          throw new TransactionError(
            "TRANSACTION_TIMED_OUT",
            `${setup.name}: the staging table ${stage.sql} of checkpoint ${checkpointId} is gone and no marker for checkpoint ${checkpointId} exists: it was dropped (by hand, or by another process using sinkId "${txn.sinkId}"), so the ${txn.rows} rows of checkpoint ${checkpointId} are LOST; replay its input to recover them`,
            { checkpointId, transactionId: txn.stageTable },
          );
        }
        const columns = target.columns.map(quote).join(", ");
        let moved: number | null;
        try {
          moved = (
            target.upsert === undefined
              ? await client.query(
                  `INSERT INTO ${target.table.sql} (${columns}) SELECT ${columns} FROM ${stage.sql}`,
                )
              : await client.query(upsertStatement(target, stage))
          ).rowCount;
        } catch (error) {
          // A constraint the staging table does not have (a foreign key, a unique index): for good.
          throw asPermanentError(error, "table", { table: target.table.sql, columns: target.columns });
        }
        if (target.upsert === undefined && moved !== txn.rows) {
          throw new TransactionError(
            "COMMIT_FAILED",
            `${setup.name}: the staging table ${stage.sql} of checkpoint ${checkpointId} holds ${moved} rows, but ${txn.rows} were staged: it was changed behind the sink's back; nothing was committed`,
            { checkpointId, transactionId: txn.stageTable },
          );
        }
        await insertMarker(setup, client, txn, checkpointId);
        await client.query(`DROP TABLE ${stage.sql}`);
        await client.query("COMMIT");
      } catch (error) {
        // The connection is discarded (withClient), which rolls back whatever is open.
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    });
  }

  /** Drops the staging table. */
  async abort(txn: PostgresTransaction): Promise<void> {
    if (txn.stageTable === undefined) return;
    await this.setup.pool.pool.query(
      `DROP TABLE IF EXISTS ${tableName(this.setup.schema, txn.stageTable).sql}`,
    );
  }
}
