import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runSampleJob } from "../dashboard/testing/run-sample-job.js";
import { readSinkTransactions, splitPositionsOf } from "./checkpoint-contents.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

describe("readSinkTransactions", () => {
  it("reads each sink subtask's transactions out of a real job's checkpoint", async () => {
    const root = await mkdtemp(join(tmpdir(), "onceflow-contents-"));
    roots.push(root);
    const { storage, jobId, result } = await runSampleJob({ root, count: 400, recordsPerSecond: 2000 });
    const final = (await storage.list(jobId)).at(-1)!;
    expect(final.checkpointId).toBe(result.lastCheckpointId);
    const { transactions, unreadableSubtasks } = readSinkTransactions(
      await storage.load(jobId, final.scope, final.checkpointId),
    );
    expect(unreadableSubtasks).toEqual([]);
    // Each subtask pre-committed its transaction under the final checkpoint and opened the next one.
    const pending = transactions.filter((t) => t.kind === "pending");
    expect(pending.map((t) => [t.sink, t.subtaskIndex, t.checkpointId])).toEqual([
      ["orders-file", 0, final.checkpointId],
      ["orders-file", 1, final.checkpointId],
    ]);
    for (const t of pending) {
      expect(t.handleBytes).toBeGreaterThan(0);
      expect(t.description).toContain("stagingFile");
      expect(t.startedAt).toBeGreaterThan(final.triggeredAt - 60_000);
      expect(t.startedAt).toBeLessThanOrEqual(final.completedAt);
    }
  });

  it("reports state that is not a onceflow snapshot instead of throwing", () => {
    const checkpoint = createTestCheckpoint({ jobId: "tool", checkpointId: 1, states: ["raw", "bytes"] });
    expect(readSinkTransactions(checkpoint)).toEqual({ transactions: [], unreadableSubtasks: [0, 1] });
  });
});

describe("splitPositionsOf", () => {
  it("lists the summary's splits in natural order with their subtask", () => {
    const { metadata } = createTestCheckpoint({
      jobId: "orders",
      checkpointId: 2,
      summary: {
        splits: {
          "orders-10": { subtask: 1, offset: "7" },
          "orders-2": { subtask: 0, offset: "42" },
          legacy: "12",
        },
      },
    });
    expect(splitPositionsOf(metadata)).toEqual([
      { splitKey: "legacy", subtask: undefined, position: { value: "12" } },
      { splitKey: "orders-2", subtask: 0, position: { offset: "42" } },
      { splitKey: "orders-10", subtask: 1, position: { offset: "7" } },
    ]);
    expect(splitPositionsOf(createTestCheckpoint({ jobId: "x", checkpointId: 1 }).metadata)).toEqual([]);
  });
});
