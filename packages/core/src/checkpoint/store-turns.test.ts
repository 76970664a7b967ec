import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkpointDirectoryName, filesystem } from "./filesystem-checkpoint-storage.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

// A busy job's event loop turns slowly (its subtasks catch up with a backlog between two turns), and
// every awaited file operation of a store waits for a turn of its own: the store's latency is its
// number of awaited steps times the length of a turn. Counted here in turns, not timed.

const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

/** Runs `work` while every turn of the event loop burns `turnMs` of CPU; returns the turns it took. */
async function turnsOf(work: () => Promise<void>, turnMs: number): Promise<number> {
  let turns = 0;
  let busy = true;
  const burn = (): void => {
    if (!busy) return;
    turns++;
    const until = performance.now() + turnMs;
    while (performance.now() < until) {
      // a subtask's batch
    }
    setImmediate(burn);
  };
  setImmediate(burn);
  try {
    await work();
  } finally {
    busy = false;
  }
  return turns;
}

describe("FileSystemCheckpointStorage.store on a busy event loop", () => {
  it("awaits the disk only: a few turns per store, the first after a claim too, and without an incarnation", async () => {
    const root = await mkdtemp(join(tmpdir(), "onceflow-store-turns-"));
    roots.push(root);
    const storage = filesystem(root);
    const incarnation = await storage.claimIncarnation("orders", "all");
    // The claim made the scope's folder and cleaned its leftovers up, so the first store is as quick.
    const counted: number[] = [];
    for (const checkpointId of [1, 2, 3, 4]) {
      counted.push(
        await turnsOf(
          () =>
            storage.store(
              createTestCheckpoint({
                jobId: "orders",
                checkpointId,
                incarnation,
                states: ["a".repeat(50_000), "b"],
              }),
            ),
          30,
        ),
      );
    }
    const plain = filesystem(await mkdtemp(join(tmpdir(), "onceflow-store-turns-")));
    roots.push(plain.root);
    // Without a claim the first store makes the scope's folder: not counted.
    await plain.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
    counted.push(
      await turnsOf(() => plain.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 })), 30),
    );
    // Two awaited steps (every fsync side by side, then the scope folder's), a turn more when an
    // fsync outlasts a turn; the store of ten awaited steps before took 8-10.
    for (const turns of counted) expect(turns).toBeLessThanOrEqual(4);
    // And it stored them.
    expect((await readdir(join(root, "orders", "all"))).sort()).toEqual(
      [1, 2, 3, 4].map((id) => checkpointDirectoryName(id)),
    );
    expect((await storage.load("orders", "all", 4)).subtaskStates.get(0)?.toString()).toBe(
      "a".repeat(50_000),
    );
  });

  it("writes a state over 1 MiB in the thread pool, whole, and stores it", async () => {
    const storage = filesystem(await mkdtemp(join(tmpdir(), "onceflow-store-turns-")));
    roots.push(storage.root);
    const incarnation = await storage.claimIncarnation("orders", "all");
    const large = Buffer.alloc(5 * 1024 * 1024 + 7);
    for (let index = 0; index < large.length; index += 4096) large[index] = index % 251;
    const turns = await turnsOf(
      () =>
        storage.store(
          createTestCheckpoint({ jobId: "orders", checkpointId: 1, incarnation, states: [large, "small"] }),
        ),
      30,
    );
    // The large write and its fsync in the pool: a turn or two more than the small files' two.
    expect(turns).toBeLessThanOrEqual(6);
    const loaded = await storage.load("orders", "all", 1);
    expect(loaded.subtaskStates.get(0)?.equals(large)).toBe(true);
    expect(loaded.subtaskStates.get(1)?.toString()).toBe("small");
  });
});
