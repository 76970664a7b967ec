import { CheckpointError, TransactionError } from "@onceflow/core";
import type { PoolClient } from "pg";
import { asPermanentError, asRecordRejected } from "../errors/permanent-errors.js";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { copyChunks } from "../sql/copy-buffer.js";
import { copyText } from "../sql/copy-writer.js";
import { literal } from "../sql/identifiers.js";
import { errorField, messageOf, SqlState, sqlState } from "../sql/pg-errors.js";
import { connectListening, withClient } from "../sql/pool.js";
import { prepareTransaction } from "../sql/prepared-transactions.js";
import { insertMarker, markerEpoch } from "./commit-markers.js";
import type { OpenHandle, OutgoingBatch, PostgresTransaction, SinkMode, SinkSetup } from "./sink-mode.js";
import { upsertStatement } from "./upsert-statement.js";

/**
 * The gid of a prepared transaction: `<sinkId>-<subtask>-<epoch>-<checkpointId>`. The epoch (new
 * at every start of an attempt) keeps a later attempt from ever reusing a gid that an older handle
 * — a zombie, or a stale checkpoint — could commit or roll back. `<sinkId>-<subtask>-` stays the
 * prefix that finds every leftover of a subtask (sink ids contain no `-`). At most 150 + 3 + 3 × 16
 * bytes: under PostgreSQL's 200.
 *
 * @example
 * ```ts
 * preparedGid("orders.out", 0, 3, 12); // "orders.out-0-3-12"
 * ```
 */
export function preparedGid(sinkId: string, subtask: number, epoch: number, checkpointId: number): string {
  return `${sinkId}-${subtask}-${epoch}-${checkpointId}`;
}

/**
 * Prepared mode: one PostgreSQL transaction per checkpoint interval on its own connection, ended by
 * `PREPARE TRANSACTION` at the checkpoint barrier and made visible by `COMMIT PREPARED` when the
 * checkpoint completes. Both run under the epoch fence (see `ControlTables.withEpochFence`), and
 * the transaction writes the checkpoint's marker, so a gid that is gone is told apart: committed
 * (marker of this epoch), fenced (marker of another) or lost (no marker).
 *
 * @example
 * ```ts
 * const mode = new PreparedMode(setup);
 * await mode.send(txn, handle, batch);
 * await mode.preCommit(txn, handle, 12); // PREPARE TRANSACTION 'orders.out-0-3-12'
 * await mode.commit(txn); // COMMIT PREPARED
 * ```
 */
export class PreparedMode implements SinkMode {
  constructor(private readonly setup: SinkSetup) {}

  async send(_txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch): Promise<void> {
    const setup = this.setup;
    const client = await this.transactionClient(handle);
    const target = setup.target;
    try {
      if (batch.kind === "records") await setup.write?.(client, batch.records);
      else if (target !== undefined) {
        // Upserts go to the scratch table first and are merged at pre-commit.
        const into = target.upsert === undefined ? target.table : target.scratch!;
        await copyText(client, into, batch.columns, copyChunks(batch.copy));
      }
    } catch (error) {
      handle.clientError ??= error instanceof Error ? error : new Error(String(error));
      throw asPermanentError(error, target === undefined ? "write" : "table", {
        table: target?.table.sql ?? errorField(error, "table") ?? "the custom write's table",
        columns: target?.columns ?? [],
        ...(batch.kind === "copy" ? { rowAt: batch.rowAt } : {}),
      });
    }
  }

  /** Upsert merge, marker, then `PREPARE TRANSACTION` under the epoch fence (checking its command tag); releases the connection. */
  async preCommit(txn: PostgresTransaction, handle: OpenHandle, checkpointId: number): Promise<void> {
    if (handle.client === undefined) return; // Nothing was written: nothing to prepare.
    if (handle.clientError !== undefined) throw handle.clientError;
    const setup = this.setup;
    const client = handle.client;
    const target = setup.target;
    const gid = preparedGid(setup.sinkId, setup.subtask, txn.epoch, checkpointId);
    try {
      if (target?.upsert !== undefined && target.scratch !== undefined) {
        try {
          await client.query(upsertStatement(target, target.scratch));
        } catch (error) {
          throw asRecordRejected(error, { table: target.table.sql, columns: target.columns }) ?? error;
        }
        // Only this transaction's rows are visible to it; the others' are invisible and untouched.
        await client.query(`DELETE FROM ${target.scratch.sql}`);
      }
      // Marker and PREPARE under the fence: a newer attempt's epoch bump waits for them, and then
      // finds this gid among the leftovers it rolls back.
      await setup.control.withEpochFence(
        client,
        setup.sinkId,
        setup.subtask,
        setup.epoch,
        checkpointId,
        async () => {
          await insertMarker(setup, client, txn, checkpointId);
          await prepareTransaction(client, gid, checkpointId, setup.name);
        },
      );
      txn.gid = gid;
      handle.client = undefined;
      handle.detach?.();
      client.release();
    } catch (error) {
      handle.clientError ??= error instanceof Error ? error : new Error(String(error));
      const state = sqlState(error);
      if (state === SqlState.duplicateObject) {
        throw new TransactionError(
          "TRANSACTION_FENCED",
          `${setup.name}: gid '${gid}' is already prepared by someone else: another process uses sinkId "${setup.sinkId}" for subtask ${setup.subtask}. Stop it, or give the sinks distinct sinkIds`,
          { checkpointId, transactionId: gid, cause: error },
        );
      }
      if (state === SqlState.inFailedTransaction) {
        throw new CheckpointError(
          "CHECKPOINT_FAILED",
          `${setup.name}: the transaction of checkpoint ${checkpointId} had already failed (a statement inside it raised, for example in a custom write that caught the error) and cannot be prepared; the checkpoint fails and the job restarts from the previous one`,
          { checkpointId, cause: error },
        );
      }
      if (state === SqlState.objectNotInPrerequisiteState) {
        throw new PostgresConfigurationError(
          "mode",
          PostgresErrorReason.preparedTransactionsDisabled,
          `PREPARE TRANSACTION failed: ${messageOf(error)}. Raise max_prepared_transactions on the server (then restart it), or use mode 'staging'`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /**
   * `COMMIT PREPARED` on its own connection with `lock_timeout`, under the epoch fence of this
   * attempt (a zombie's commit is refused); a gid that is gone is resolved through the marker.
   */
  async commit(txn: PostgresTransaction): Promise<void> {
    const gid = txn.gid;
    if (gid === undefined) return; // An empty transaction was never prepared.
    const setup = this.setup;
    await withClient(setup.pool.pool, async (client) => {
      await client.query(`SET lock_timeout = ${setup.lockTimeout}`);
      await setup.control.withEpochFence(
        client,
        setup.sinkId,
        setup.subtask,
        setup.epoch,
        txn.checkpointId ?? -1,
        async () => {
          try {
            await client.query(`COMMIT PREPARED ${literal(gid)}`);
          } catch (error) {
            if (sqlState(error) !== SqlState.undefinedObject) throw error;
            await this.resolveMissing(client, txn, gid, error);
          }
        },
      );
      await client.query("RESET lock_timeout");
    });
  }

  /** Rolls back the open transaction (or drops its broken connection) and a prepared gid. */
  async abort(txn: PostgresTransaction, handle: OpenHandle | undefined): Promise<void> {
    if (handle?.client !== undefined) {
      const client = handle.client;
      handle.client = undefined;
      let broken: unknown = handle.clientError;
      try {
        if (broken === undefined) await client.query("ROLLBACK");
      } catch (error) {
        broken = error;
      } finally {
        handle.detach?.();
        client.release(broken === undefined ? undefined : true);
      }
    }
    if (txn.gid !== undefined) await rollbackPrepared(this.setup, [txn.gid]);
  }

  /** The connection holding the open transaction, begun on the first row. */
  private async transactionClient(handle: OpenHandle): Promise<PoolClient> {
    if (handle.clientError !== undefined) throw handle.clientError;
    if (handle.client !== undefined) return handle.client;
    // A connection lost while idle in the transaction must fail the transaction, not the process.
    const onError = (error: Error) => {
      handle.clientError ??= error;
    };
    const client = await connectListening(this.setup.pool.pool, onError);
    handle.detach = () => client.off("error", onError);
    try {
      if (handle.clientError !== undefined) throw handle.clientError;
      await client.query("BEGIN");
      await client.query(`SET LOCAL lock_timeout = ${this.setup.lockTimeout}`);
    } catch (error) {
      handle.detach?.();
      client.release(true);
      throw error;
    }
    handle.client = client;
    return client;
  }

  /** The gid is gone: committed earlier (marker of this epoch), fenced (another) or lost (none) — never silently. */
  private async resolveMissing(
    client: PoolClient,
    txn: PostgresTransaction,
    gid: string,
    cause: unknown,
  ): Promise<void> {
    const setup = this.setup;
    const checkpointId = txn.checkpointId ?? -1;
    const epoch = await markerEpoch(setup, client, txn);
    if (epoch === txn.epoch) {
      setup.logger.debug({ checkpointId, transaction: gid }, "already committed (its marker exists)");
      return;
    }
    if (epoch !== undefined) {
      throw new TransactionError(
        "TRANSACTION_FENCED",
        `${setup.name}: gid '${gid}' of checkpoint ${checkpointId} is gone, and checkpoint ${checkpointId} was committed by another attempt of sink "${txn.sinkId}" (epoch ${epoch}, this transaction has ${txn.epoch}): this handle is stale — a zombie process, or a checkpoint that should never have been restored — and must not be committed`,
        { checkpointId, transactionId: gid, cause },
      );
    }
    throw new TransactionError(
      "TRANSACTION_TIMED_OUT",
      `${setup.name}: gid '${gid}' of checkpoint ${checkpointId} is gone and no marker for checkpoint ${checkpointId} exists in ${setup.control.markers.sql}: it was rolled back (ROLLBACK PREPARED by hand, or by another process using sinkId "${txn.sinkId}"), so the ${txn.rows} rows of checkpoint ${checkpointId} are LOST. Check pg_prepared_xacts and the server log; to recover them, replay the input of checkpoint ${checkpointId}`,
      { checkpointId, transactionId: gid, cause },
    );
  }
}

/**
 * `ROLLBACK PREPARED` of each gid; one that is already gone is fine.
 *
 * @example
 * ```ts
 * await rollbackPrepared(setup, ["orders.out-0-3-12"]);
 * ```
 */
export async function rollbackPrepared(setup: SinkSetup, gids: readonly string[]): Promise<void> {
  for (const gid of gids) {
    try {
      await setup.pool.pool.query(`ROLLBACK PREPARED ${literal(gid)}`);
    } catch (error) {
      if (sqlState(error) !== SqlState.undefinedObject) throw error;
    }
  }
}
