import type { CheckpointStorage } from "../../src/index.js";

/**
 * Whether any stored checkpoint of the job carries `transactionId` — found in its raw state bytes,
 * where the sink's serialized transaction handles sit (ids are ASCII, so they appear byte for byte).
 * What a stored checkpoint carries may stay prepared: a restore will commit or abort it.
 *
 * @example
 * ```ts
 * if (!(await storedCheckpointsReference(storage, "explore", "p3/s0of2/i7/a0/t4"))) problems.push("orphan");
 * ```
 */
export async function storedCheckpointsReference(
  storage: CheckpointStorage,
  jobId: string,
  transactionId: string,
): Promise<boolean> {
  const needle = Buffer.from(transactionId, "latin1");
  for (const metadata of await storage.list(jobId)) {
    const checkpoint = await storage.load(jobId, metadata.scope, metadata.checkpointId);
    for (const bytes of checkpoint.subtaskStates.values()) if (bytes.includes(needle)) return true;
  }
  return false;
}
