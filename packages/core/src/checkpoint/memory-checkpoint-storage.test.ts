import { describe, expect, it } from "vitest";
import { CheckpointError } from "../errors/onceflow-error.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

// The CheckpointStorage contract runs on this storage in @onceflow/testkit (contract folder).

// Reaches into the private map: the only way to damage memory state behind the storage's back.
function storedStates(storage: MemoryCheckpointStorage): Map<string, { states: Map<number, Buffer> }> {
  return (storage as unknown as { checkpoints: Map<string, { states: Map<number, Buffer> }> }).checkpoints;
}

describe("MemoryCheckpointStorage", () => {
  it("refuses to load state that changed behind its back", async () => {
    const storage = new MemoryCheckpointStorage();
    await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
    storedStates(storage).get("orders/all/2")?.states.get(1)?.writeUInt8(0x21, 0);
    const error = await storage.load("orders", "all", 2).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("CHECKPOINT_CORRUPT");
  });

  it("gives each load its own metadata object", async () => {
    const storage = new MemoryCheckpointStorage();
    await storage.store(
      createTestCheckpoint({ jobId: "orders", checkpointId: 1, summary: { operators: ["a"] } }),
    );
    const first = await storage.load("orders", "all", 1);
    (first.metadata.summary.operators as string[]).push("mutated");
    const second = await storage.load("orders", "all", 1);
    expect(second.metadata.summary).toEqual({ operators: ["a"] });
    expect(storage.description).toBe("memory");
  });
});
