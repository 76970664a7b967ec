import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createMemoryLogger, type Logger } from "../observability/logger.js";
import { Job } from "../runtime/job.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { CheckpointHistoryEntry } from "./checkpoint-history-entries.js";
import { filesystem } from "./filesystem-checkpoint-storage.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";

// The storages' own history cases (kept past retention, bounded, shared) are in the contract suite
// of @onceflow/testkit; here: what the job records, and the filesystem's file.

const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

function numbersJob(
  storage: MemoryCheckpointStorage,
  history?: number,
  logger?: Logger,
  output = new CollectedOutput<number>(),
): Job {
  const job = new Job({
    jobId: "numbers",
    checkpointing: { interval: 20, storage, ...(history === undefined ? {} : { history }) },
    ...(logger === undefined ? {} : { logger }),
  });
  job
    .fromSource(
      new GeneratorSource<number>({
        count: 600,
        splits: 1,
        generate: (index) => index,
        recordsPerSecond: 3_000,
      }),
      { uid: "numbers" },
    )
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return job;
}

const completedIds = (entries: readonly CheckpointHistoryEntry[]): number[] =>
  entries.filter((entry) => entry.kind === "completed").map((entry) => entry.checkpointId);

describe("the checkpoint history a job records", () => {
  it("records every completed checkpoint past the default retention of 3, and the restore of a second run", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<number>();
    const result = await numbersJob(storage, undefined, undefined, output).execute();
    const listed = await storage.list("numbers");
    expect(listed).toHaveLength(3);
    const recorded = await storage.readHistory("numbers");
    const ids = completedIds(recorded);
    expect(ids.length).toBeGreaterThan(3);
    expect(ids).toEqual(Array.from({ length: result.lastCheckpointId }, (_, i) => i + 1));
    const last = recorded.at(-1);
    expect(last).toMatchObject({ kind: "completed", checkpointId: result.lastCheckpointId, isFinal: true });
    expect(last?.kind === "completed" && last.sizeBytes).toBe(
      listed.at(-1)?.subtasks.reduce((sum, entry) => sum + entry.stateBytes, 0),
    );

    // Run again on the same storage: it restores the final checkpoint, and says so in the history.
    await numbersJob(storage, undefined, undefined, output).execute();
    const restores = (await storage.readHistory("numbers")).filter((entry) => entry.kind === "restored");
    expect(restores).toMatchObject([{ checkpointId: result.lastCheckpointId, scope: "all", lineage: 0 }]);
  }, 30_000);

  it("keeps at most checkpointing.history entries", async () => {
    const storage = new MemoryCheckpointStorage();
    const result = await numbersJob(storage, 4).execute();
    expect(result.lastCheckpointId).toBeGreaterThan(4);
    expect(completedIds(await storage.readHistory("numbers"))).toEqual(
      [3, 2, 1, 0].map((back) => result.lastCheckpointId - back),
    );
  }, 30_000);

  it("never fails a checkpoint when the history cannot be recorded: warns once", async () => {
    class NoHistory extends MemoryCheckpointStorage {
      override async recordHistory(): Promise<void> {
        throw new Error("the history table is missing");
      }
    }
    const logger = createMemoryLogger();
    const result = await numbersJob(new NoHistory(), undefined, logger).execute();
    expect(result.lastCheckpointId).toBeGreaterThan(1);
    const about = (level: string) =>
      logger.entries.filter(
        (e) => e.level === level && e.message.startsWith("could not record the checkpoint history"),
      );
    expect(about("warn")).toHaveLength(1);
    expect(about("debug").length).toBeGreaterThan(0);
  }, 30_000);

  it("refuses a checkpointing.history that is not a whole number of at least 1", () => {
    const storage = new MemoryCheckpointStorage();
    for (const history of [0, 1.5]) {
      expect(() => numbersJob(storage, history)).toThrow(/checkpointing\.history/);
    }
  });
});

describe("FileSystemCheckpointStorage's history file", () => {
  it("compacts to the newest entries once it holds twice as many, and skips a torn line", async () => {
    const root = await mkdtemp(join(tmpdir(), "onceflow-history-"));
    roots.push(root);
    const storage = filesystem(root);
    const entry = (checkpointId: number): CheckpointHistoryEntry => ({
      kind: "restored",
      jobId: "orders",
      scope: "all",
      checkpointId,
      at: checkpointId,
      lineage: 0,
    });
    const file = join(root, "orders", ".history", "all.jsonl");
    const lines = async () => (await readFile(file, "utf8")).trimEnd().split("\n");
    for (let checkpointId = 1; checkpointId <= 9; checkpointId++)
      await storage.recordHistory(entry(checkpointId), 5);
    // The header, and the 9 entries appended since: not compacted yet.
    expect(await lines()).toHaveLength(10);
    expect((await storage.readHistory("orders")).map((e) => e.checkpointId)).toEqual([5, 6, 7, 8, 9]);
    await storage.recordHistory(entry(10), 5);
    expect(await lines()).toEqual([
      JSON.stringify({ checkpointHistory: 1, keep: 5 }),
      ...[6, 7, 8, 9, 10].map((id) => JSON.stringify(entry(id))),
    ]);
    // A crash in the middle of an append leaves a torn last line: readers skip it.
    await appendFile(file, '{"kind":"comple');
    const reopened = filesystem(root);
    expect((await reopened.readHistory("orders")).map((e) => e.checkpointId)).toEqual([6, 7, 8, 9, 10]);
    expect(await reopened.list("orders")).toEqual([]);
    expect(await reopened.listJobs()).toEqual(["orders"]);
  });
});
