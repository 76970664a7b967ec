import { TransactionError } from "@onceflow/core";
import type { ClientBase } from "pg";
import { SqlState, sqlState } from "../sql/pg-errors.js";
import type { PostgresTransaction, SinkSetup } from "./sink-mode.js";

/**
 * Writes the marker (sink, subtask, checkpoint) inside the transaction that makes the checkpoint's
 * rows visible, and prunes old markers. The marker of the transaction's own subtask: after a
 * rescale another subtask may be the one committing it.
 *
 * @throws TransactionError `TRANSACTION_FENCED` when the checkpoint's marker exists already.
 * @example
 * ```ts
 * await insertMarker(setup, client, txn, 12);
 * ```
 */
export async function insertMarker(
  setup: SinkSetup,
  client: ClientBase,
  txn: PostgresTransaction,
  checkpointId: number,
): Promise<void> {
  try {
    await setup.control.insertMarker(client, setup.sinkId, txn.subtask, checkpointId, txn.epoch, txn.rows);
  } catch (error) {
    if (sqlState(error) !== SqlState.uniqueViolation) throw error;
    throw new TransactionError(
      "TRANSACTION_FENCED",
      `${setup.name}: checkpoint ${checkpointId} of sink "${setup.sinkId}" subtask ${txn.subtask} is already committed (its marker exists), by another process or an earlier run that got further than the checkpoint this one restored. Restart so that the job restores the latest checkpoint; if you restored an older checkpoint on purpose, delete the newer markers: DELETE FROM ${setup.control.markers.sql} WHERE sink_id = '${setup.sinkId}' AND checkpoint_id >= ${checkpointId}`,
      { checkpointId, transactionId: txn.gid ?? txn.stageTable, cause: error },
    );
  }
  await setup.control.prune(client, setup.sinkId, txn.subtask, checkpointId, setup.markerRetention);
}

/**
 * The epoch recorded in the marker of the transaction's checkpoint, or `undefined` when there is
 * no marker (the checkpoint was never committed).
 *
 * @example
 * ```ts
 * const epoch = await markerEpoch(setup, client, txn); // txn.epoch: committed by this transaction
 * ```
 */
export async function markerEpoch(
  setup: SinkSetup,
  client: ClientBase,
  txn: PostgresTransaction,
): Promise<number | undefined> {
  const marker = await client.query<{ epoch: string }>(
    `SELECT epoch::text FROM ${setup.control.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id = $3`,
    [txn.sinkId, txn.subtask, txn.checkpointId ?? -1],
  );
  const epoch = marker.rows[0]?.epoch;
  return epoch === undefined ? undefined : Number(epoch);
}
