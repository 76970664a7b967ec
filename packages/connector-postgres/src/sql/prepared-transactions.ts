import { CheckpointError } from "@onceflow/core";
import type { ClientBase } from "pg";
import { literal } from "./identifiers.js";

/**
 * `PREPARE TRANSACTION 'gid'`, checking the command tag: after an error inside the transaction
 * PostgreSQL does not raise but answers `ROLLBACK` (the transaction is gone), which must fail the
 * checkpoint rather than pass for a prepared transaction.
 *
 * @throws CheckpointError `CHECKPOINT_FAILED` when the tag is not `PREPARE`.
 * @example
 * ```ts
 * await prepareTransaction(client, "orders.out-0-12", 12, "PostgresSink");
 * ```
 */
export async function prepareTransaction(
  client: ClientBase,
  gid: string,
  checkpointId: number,
  sinkName: string,
): Promise<void> {
  if (Buffer.byteLength(gid) >= 200) {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `${sinkName}: gid '${gid}' is 200 bytes or longer: use a shorter sinkId`,
      {
        checkpointId,
      },
    );
  }
  const result = await client.query(`PREPARE TRANSACTION ${literal(gid)}`);
  if (result.command !== "PREPARE") {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `${sinkName}: PREPARE TRANSACTION '${gid}' for checkpoint ${checkpointId} answered ${result.command}, not PREPARE: the transaction had failed and was rolled back; the checkpoint fails and the job restarts from the previous one`,
      { checkpointId },
    );
  }
}
