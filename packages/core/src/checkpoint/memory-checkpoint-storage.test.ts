import { describe, expect, it } from "vitest";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";
import { describeCheckpointStorageContract, makeCheckpoint } from "./testing/checkpoint-storage-contract.js";

// Reaches into the private map: the only way to damage memory state behind the storage's back.
function storedStates(storage: MemoryCheckpointStorage): Map<string, { states: Map<number, Buffer> }> {
  return (storage as unknown as { checkpoints: Map<string, { states: Map<number, Buffer> }> }).checkpoints;
}

describeCheckpointStorageContract("MemoryCheckpointStorage", async () => new MemoryCheckpointStorage(), {
  corrupt: async (storage, at) => {
    const stored = storedStates(storage).get(`${at.jobId}/${at.scope}/${at.checkpointId}`);
    stored?.states.get(at.subtaskIndex)?.writeUInt8(0x21, 0);
  },
});

describe("MemoryCheckpointStorage", () => {
  it("gives each load its own metadata object", async () => {
    const storage = new MemoryCheckpointStorage();
    await storage.store(makeCheckpoint({ jobId: "orders", checkpointId: 1, summary: { operators: ["a"] } }));
    const first = await storage.load("orders", "all", 1);
    (first.metadata.summary.operators as string[]).push("mutated");
    const second = await storage.load("orders", "all", 1);
    expect(second.metadata.summary).toEqual({ operators: ["a"] });
    expect(storage.description).toBe("memory");
  });
});
