import {
  CheckpointError,
  type CompletedCheckpoint,
  ConfigurationError,
  createCompletedCheckpoint,
  MemoryCheckpointStorage,
} from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { faultyCheckpointStorage } from "./faulty-checkpoint-storage.js";

function checkpoint(
  checkpointId: number,
  options: { scope?: string; incarnation?: number } = {},
): CompletedCheckpoint {
  return createCompletedCheckpoint({
    jobId: "orders",
    checkpointId,
    scope: options.scope ?? "all",
    parallelism: 1,
    subtaskStates: new Map([[0, Buffer.from(`state-${checkpointId}`)]]),
    ...(options.incarnation === undefined ? {} : { incarnation: options.incarnation }),
  });
}

async function settle(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => "stored",
    (error: unknown) => error,
  );
}

const listed = async (storage: { list(jobId: string): Promise<{ checkpointId: number }[]> }) =>
  (await storage.list("orders")).map((metadata) => metadata.checkpointId);

describe("faultyCheckpointStorage", () => {
  it("passes everything through when no fault is set", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory);
    expect(storage.description).toBe("faulty(memory)");
    await storage.store(checkpoint(1));
    expect(await listed(memory)).toEqual([1]);
    expect((await storage.load("orders", "all", 1)).subtaskStates.get(0)?.toString()).toBe("state-1");
    await storage.discard("orders", "all", 1);
    expect(await listed(storage)).toEqual([]);
    expect(storage.stores.map((record) => record.status)).toEqual(["stored"]);
  });

  it("delays each store by a fixed or computed latency", async () => {
    const storage = faultyCheckpointStorage(new MemoryCheckpointStorage(), { latency: 80 });
    let started = performance.now();
    await storage.store(checkpoint(1));
    expect(performance.now() - started).toBeGreaterThanOrEqual(70);

    storage.setLatency((attempt) => (attempt.metadata.checkpointId === 3 ? 120 : 0));
    started = performance.now();
    await storage.store(checkpoint(2));
    expect(performance.now() - started).toBeLessThan(60);
    const third = storage.store(checkpoint(3));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await listed(storage)).toEqual([1, 2]);
    expect(storage.stores[2]?.status).toBe("waiting");
    await third;
    expect(await listed(storage)).toEqual([1, 2, 3]);
  });

  it("fails the next N stores, and stores matching a predicate, without storing them", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory, { failNextStores: 2 });
    for (const id of [1, 2]) {
      const error = await settle(storage.store(checkpoint(id)));
      expect(error).toBeInstanceOf(CheckpointError);
      expect((error as CheckpointError).code).toBe("CHECKPOINT_FAILED");
      expect((error as CheckpointError).message).toMatch(/injected failure of store \d \(checkpoint \d/);
    }
    await storage.store(checkpoint(3));
    storage.failStoresWhen((attempt) => attempt.metadata.checkpointId % 2 === 0);
    expect(await settle(storage.store(checkpoint(4)))).toBeInstanceOf(CheckpointError);
    await storage.store(checkpoint(5));
    storage.failStoresWhen(undefined).failNextStores(1);
    expect(await settle(storage.store(checkpoint(6)))).toBeInstanceOf(CheckpointError);
    await storage.store(checkpoint(6));
    expect(await listed(memory)).toEqual([3, 5, 6]);
    expect(storage.stores.map((record) => record.status)).toEqual([
      "injected-failure",
      "injected-failure",
      "stored",
      "injected-failure",
      "stored",
      "injected-failure",
      "stored",
    ]);
    expect(() => storage.failNextStores(-1)).toThrow(ConfigurationError);
  });

  it("throws the error a test chooses", async () => {
    const storage = faultyCheckpointStorage(new MemoryCheckpointStorage(), {
      failNextStores: 1,
      createError: () => Object.assign(new Error("disk full"), { code: "ENOSPC" }),
    });
    expect(await settle(storage.store(checkpoint(1)))).toMatchObject({
      message: "disk full",
      code: "ENOSPC",
    });
  });

  it("holds a store until it is released: the wrapped storage is called only then", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory, {
      holdStores: (attempt) => attempt.metadata.checkpointId === 2,
    });
    await storage.store(checkpoint(1));
    let settled: unknown;
    const pending = storage.store(checkpoint(2)).then(
      () => {
        settled = "stored";
      },
      (error: unknown) => {
        settled = error;
      },
    );
    const held = await storage.nextHeldStore();
    expect(held.attempt.metadata.checkpointId).toBe(2);
    expect(storage.heldStores).toHaveLength(1);
    await storage.store(checkpoint(3));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBeUndefined();
    expect(await listed(memory)).toEqual([1, 3]);
    expect(storage.stores.map((record) => record.status)).toEqual(["stored", "held", "stored"]);

    expect(await held.release()).toEqual({ status: "stored" });
    await pending;
    expect(settled).toBe("stored");
    expect(await listed(memory)).toEqual([1, 2, 3]);
    expect(held.settled).toBe(true);
    expect(storage.heldStores).toHaveLength(0);
    await expect(held.release()).rejects.toBeInstanceOf(ConfigurationError);
  });

  it("lets a held store land after its timeout, where a later claim fences it with SUPERSEDED", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory, { holdStores: true });
    const first = await storage.claimIncarnation("orders", "all");
    // The store of checkpoint 1 hangs; the caller's timeout gives up on it.
    const late = storage.store(checkpoint(1, { incarnation: first }));
    const timedOut = await Promise.race([
      late.then(() => "landed"),
      new Promise((resolve) => setTimeout(() => resolve("timed out"), 30)),
    ]);
    expect(timedOut).toBe("timed out");
    // The coordinator re-claims after the previous incarnation, which fences the late store.
    const second = await storage.claimIncarnation("orders", "all", { after: first });
    expect(second).toBeGreaterThan(first);
    storage.stopHoldingStores();
    await storage.store(checkpoint(2, { incarnation: second }));

    const outcome = await (await storage.nextHeldStore()).release();
    expect(outcome.status).toBe("failed");
    const error = outcome.status === "failed" ? outcome.error : undefined;
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("SUPERSEDED");
    expect(await settle(late)).toBe(error);
    expect(await listed(memory)).toEqual([2]);
    expect(storage.stores.map((record) => record.status)).toEqual(["failed", "stored"]);
  });

  it("lands a released store when no claim came in between, and fails one on request", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory).holdStores();
    const incarnation = await storage.claimIncarnation("orders", "all");
    const landing = storage.store(checkpoint(1, { incarnation }));
    const failing = storage.store(checkpoint(2, { incarnation }));
    const kept = storage.store(checkpoint(3, { incarnation }));
    const heldTwo = await storage.nextHeldStore((attempt) => attempt.metadata.checkpointId === 2);
    heldTwo.fail();
    expect(await settle(failing)).toBeInstanceOf(CheckpointError);
    expect(await storage.releaseHeldStores((attempt) => attempt.metadata.checkpointId === 1)).toEqual([
      { status: "stored" },
    ]);
    await landing;
    expect(await listed(memory)).toEqual([1]);
    expect(storage.heldStores.map((held) => held.attempt.metadata.checkpointId)).toEqual([3]);
    expect(await storage.releaseHeldStores()).toEqual([{ status: "stored" }]);
    await kept;
    expect(await listed(memory)).toEqual([1, 3]);
  });

  it("forwards claimIncarnation faithfully, with and without after", async () => {
    const memory = new MemoryCheckpointStorage();
    const storage = faultyCheckpointStorage(memory);
    const a = await storage.claimIncarnation("orders", "subtask-0-of-2");
    const b = await memory.claimIncarnation("orders", "subtask-1-of-2");
    const c = await storage.claimIncarnation("orders", "subtask-0-of-2", { after: a });
    expect(a < b && b < c).toBe(true);
    const refused = await settle(storage.claimIncarnation("orders", "subtask-0-of-2", { after: a }));
    expect((refused as CheckpointError).code).toBe("SUPERSEDED");
  });

  it("waits for a store to be held", async () => {
    const storage = faultyCheckpointStorage(new MemoryCheckpointStorage(), { holdStores: true, latency: 30 });
    const waiting = storage.nextHeldStore((attempt) => attempt.metadata.checkpointId === 2);
    const one = storage.store(checkpoint(1));
    const two = storage.store(checkpoint(2));
    const held = await waiting;
    expect(held.attempt.metadata.checkpointId).toBe(2);
    expect(held.attempt.number).toBe(2);
    await storage.releaseHeldStores();
    await Promise.all([one, two]);
  });
});
