import { describe, expect, it } from "vitest";
import type { CheckpointMetadata } from "./checkpoint-storage.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";
import { ScopeRetention } from "./scope-retention.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

/** Counts `list` calls, and can fail the next `discard`. */
class CountingStorage extends MemoryCheckpointStorage {
  lists = 0;
  failNextDiscard = false;
  override async list(jobId: string): Promise<CheckpointMetadata[]> {
    this.lists++;
    return super.list(jobId);
  }
  override async discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    if (this.failNextDiscard) {
      this.failNextDiscard = false;
      throw new Error("the disk said no");
    }
    await super.discard(jobId, scope, checkpointId);
  }
}

async function ids(storage: MemoryCheckpointStorage, scope = "all"): Promise<number[]> {
  return (await storage.list("orders")).filter((m) => m.scope === scope).map((m) => m.checkpointId);
}

async function store(storage: MemoryCheckpointStorage, checkpointId: number, scope = "all"): Promise<void> {
  await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId, scope }));
}

describe("ScopeRetention", () => {
  it("lists once, then discards by id what falls out of the newest `retained`, in its scope only", async () => {
    const storage = new CountingStorage();
    for (const id of [1, 2, 3, 4, 5]) await store(storage, id);
    await store(storage, 1, "other");
    const retention = new ScopeRetention(storage, "orders", "all", 3);
    await retention.retain();
    expect(storage.lists).toBe(1);
    expect(await ids(storage)).toEqual([3, 4, 5]);
    storage.lists = 0;
    for (const id of [6, 7]) {
      await store(storage, id);
      retention.stored(id);
      await retention.retain();
    }
    expect(storage.lists).toBe(0);
    expect(await ids(storage)).toEqual([5, 6, 7]);
    expect(await ids(storage, "other")).toEqual([1]);
  });

  it("never discards more than listing would: a checkpoint it was not told of is kept, and found once it forgets", async () => {
    const storage = new CountingStorage();
    const retention = new ScopeRetention(storage, "orders", "all", 2);
    await store(storage, 1);
    await retention.retain();
    // Stored without telling (a store whose fate was unknown, and that landed): not known yet.
    await store(storage, 2);
    await store(storage, 3);
    retention.stored(3);
    await retention.retain();
    expect(await ids(storage)).toEqual([1, 2, 3]);
    retention.forget();
    await retention.retain();
    expect(await ids(storage)).toEqual([2, 3]);
  });

  it("lists again after a discard failed", async () => {
    const storage = new CountingStorage();
    const retention = new ScopeRetention(storage, "orders", "all", 1);
    await store(storage, 1);
    await retention.retain();
    await store(storage, 2);
    retention.stored(2);
    storage.failNextDiscard = true;
    await expect(retention.retain()).rejects.toThrow("the disk said no");
    storage.lists = 0;
    await retention.retain();
    expect(storage.lists).toBe(1);
    expect(await ids(storage)).toEqual([2]);
  });
});
