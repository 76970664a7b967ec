import {
  type CheckpointHistoryEntry,
  type CheckpointStorage,
  ConfigurationError,
  createTestCheckpoint,
  retainLatestCheckpoints,
} from "@onceflow/core";
import { expect, it } from "vitest";

function completed(checkpointId: number, scope = "all", jobId = "orders"): CheckpointHistoryEntry {
  return {
    kind: "completed",
    jobId,
    scope,
    checkpointId,
    at: 1_000 + checkpointId * 10,
    triggeredAt: 1_000 + checkpointId * 10 - 4,
    sizeBytes: 100 + checkpointId,
    parallelism: 1,
    isFinal: false,
    lineage: 0,
    incarnation: 1,
  };
}

/**
 * The checkpoint history cases of the storage contract: `recordHistory`/`readHistory` keep the
 * facts of completed, failed and restored checkpoints past retention, bounded per scope.
 */
export function checkpointHistoryCases(
  current: () => CheckpointStorage,
  reopen?: () => Promise<CheckpointStorage>,
): void {
  it("reads no history for a job it has never seen", async () => {
    expect(await current().readHistory("never-seen")).toEqual([]);
  });

  it("keeps the checkpoint history past retention: retention never discards an entry", async () => {
    const storage = current();
    for (const checkpointId of [1, 2, 3, 4, 5]) {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId }));
      await storage.recordHistory(completed(checkpointId), 100);
      await retainLatestCheckpoints(storage, "orders", 2);
    }
    const failed: CheckpointHistoryEntry = {
      kind: "failed",
      jobId: "orders",
      scope: "all",
      checkpointId: 6,
      at: 1_070,
      reason: "checkpoint 6: its snapshots timed out",
      definitive: true,
    };
    const restored: CheckpointHistoryEntry = {
      kind: "restored",
      jobId: "orders",
      scope: "all",
      checkpointId: 5,
      at: 1_080,
      lineage: 0,
      incarnation: 2,
    };
    await storage.recordHistory(failed, 100);
    await storage.recordHistory(restored, 100);
    expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([4, 5]);
    expect(await storage.readHistory("orders")).toEqual([
      ...[1, 2, 3, 4, 5].map((id) => completed(id)),
      failed,
      restored,
    ]);
  });

  it("bounds the history: the newest `keep` entries of each scope, oldest first, jobs and scopes apart", async () => {
    const storage = current();
    for (let checkpointId = 1; checkpointId <= 25; checkpointId++) {
      await storage.recordHistory(completed(checkpointId, "subtask-0-of-2"), 4);
    }
    await storage.recordHistory(completed(3, "subtask-1-of-2"), 4);
    await storage.recordHistory(completed(1, "all", "payments"), 4);
    expect((await storage.readHistory("orders")).map((e) => `${e.checkpointId}/${e.scope}`)).toEqual([
      "3/subtask-1-of-2",
      "22/subtask-0-of-2",
      "23/subtask-0-of-2",
      "24/subtask-0-of-2",
      "25/subtask-0-of-2",
    ]);
    expect((await storage.readHistory("payments")).map((e) => e.checkpointId)).toEqual([1]);
    // A smaller bound applies from the next entry on.
    await storage.recordHistory(completed(26, "subtask-0-of-2"), 2);
    expect(
      (await storage.readHistory("orders"))
        .filter((e) => e.scope === "subtask-0-of-2")
        .map((e) => e.checkpointId),
    ).toEqual([25, 26]);
  });

  it("refuses malformed history entries and bounds below 1", async () => {
    const storage = current();
    await expect(storage.recordHistory(completed(1, "a/b"), 10)).rejects.toBeInstanceOf(ConfigurationError);
    await expect(storage.recordHistory(completed(1), 0)).rejects.toThrow(/at least 1/);
    await expect(storage.readHistory("..")).rejects.toBeInstanceOf(ConfigurationError);
  });

  if (reopen !== undefined) {
    it("shares the history between instances on the same data", async () => {
      await current().recordHistory(completed(1), 10);
      const other = await reopen();
      try {
        await other.recordHistory(completed(2), 10);
        expect((await current().readHistory("orders")).map((e) => e.checkpointId)).toEqual([1, 2]);
      } finally {
        await other.close?.();
      }
    });
  }
}
