import { mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError, ConfigurationError } from "../errors/onceflow-error.js";
import { checksumOf } from "./checkpoint-files.js";
import {
  checkpointDirectoryName,
  type FileSystemCheckpointStorage,
  filesystem,
  METADATA_FILE_NAME,
} from "./filesystem-checkpoint-storage.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

// The CheckpointStorage contract runs on this storage in @onceflow/testkit (contract folder).

const roots: string[] = [];
async function newRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "onceflow-fs-storage-"));
  roots.push(root);
  return root;
}
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

async function caught(promise: Promise<unknown>): Promise<CheckpointError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CheckpointError);
  return error as CheckpointError;
}

function chkDir(root: string, checkpointId: number, scope = "all", jobId = "orders"): string {
  return join(root, jobId, scope, checkpointDirectoryName(checkpointId));
}

describe("FileSystemCheckpointStorage", () => {
  let root: string;
  let storage: FileSystemCheckpointStorage;
  beforeEach(async () => {
    root = await newRoot();
    storage = filesystem(root);
  });

  it("lays a checkpoint out as <root>/<job>/<scope>/chk-<padded id>/ with readable metadata", async () => {
    const checkpoint = createTestCheckpoint({
      jobId: "orders",
      checkpointId: 12,
      scope: "subtask-1-of-2",
      states: ["state of one"],
      subtaskIndexes: [1],
      parallelism: 2,
      summary: { operators: ["source"], splits: { "orders-1": "1200" } },
    });
    await storage.store(checkpoint);

    const dir = chkDir(root, 12, "subtask-1-of-2");
    expect(dir.endsWith(join("orders", "subtask-1-of-2", "chk-0000000012"))).toBe(true);
    expect((await readdir(dir)).sort()).toEqual([METADATA_FILE_NAME, "subtask-1.state"]);
    expect(await readFile(join(dir, "subtask-1.state"), "utf8")).toBe("state of one");
    const text = await readFile(join(dir, METADATA_FILE_NAME), "utf8");
    expect(text).toContain('\n  "checkpointId": 12,\n');
    expect(JSON.parse(text)).toEqual(checkpoint.metadata);
    expect(await readdir(join(root, "orders", "subtask-1-of-2"))).toEqual(["chk-0000000012"]);
    expect(storage.description).toBe(`filesystem:${root}`);
    expect(await storage.listJobs()).toEqual(["orders"]);
  });

  it("resolves a relative root and rejects an empty one", () => {
    expect(filesystem("relative/dir").root).toBe(join(process.cwd(), "relative/dir"));
    expect(() => filesystem("")).toThrow(ConfigurationError);
  });

  describe("a partly written or damaged checkpoint is never restored silently", () => {
    beforeEach(async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
    });

    it("ignores a temporary folder that was never renamed", async () => {
      // What a crash between writing the files and the rename leaves.
      const temp = join(root, "orders", "all", ".tmp-chk-2-abc123");
      const good = createTestCheckpoint({ jobId: "orders", checkpointId: 2 });
      await mkdir(temp);
      await writeFile(join(temp, "subtask-0.state"), good.subtaskStates.get(0)!);
      await writeFile(join(temp, "subtask-1.state"), good.subtaskStates.get(1)!);
      await writeFile(join(temp, METADATA_FILE_NAME), JSON.stringify(good.metadata));

      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
      expect((await caught(storage.load("orders", "all", 2))).code).toBe("CHECKPOINT_NOT_FOUND");
    });

    it("fails on a checkpoint folder whose metadata is missing, unless told to skip it", async () => {
      const dir = chkDir(root, 2);
      await mkdir(dir);
      await writeFile(join(dir, "subtask-0.state"), "x");

      const listed = await caught(storage.list("orders"));
      expect(listed.code).toBe("CHECKPOINT_CORRUPT");
      expect(listed.message).toContain(dir);
      const skipping = filesystem(root, { corruptCheckpoints: "skip" });
      expect((await skipping.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
      const error = await caught(storage.load("orders", "all", 2));
      expect(error.code).toBe("CHECKPOINT_CORRUPT");
      expect(error.checkpointId).toBe(2);
    });

    it("fails on a checkpoint folder whose metadata is truncated, unless told to skip it", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
      const file = join(chkDir(root, 2), METADATA_FILE_NAME);
      await truncate(file, 40);

      expect((await caught(storage.list("orders"))).code).toBe("CHECKPOINT_CORRUPT");
      const skipping = filesystem(root, { corruptCheckpoints: "skip" });
      expect((await skipping.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
      expect((await caught(storage.load("orders", "all", 2))).code).toBe("CHECKPOINT_CORRUPT");
    });

    it("fails on metadata that belongs to another checkpoint, unless told to skip it", async () => {
      // For example a folder copied by hand under the wrong name.
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
      const text = await readFile(join(chkDir(root, 1), METADATA_FILE_NAME), "utf8");
      await writeFile(join(chkDir(root, 2), METADATA_FILE_NAME), text);

      expect((await caught(storage.list("orders"))).code).toBe("CHECKPOINT_CORRUPT");
      const skipping = filesystem(root, { corruptCheckpoints: "skip" });
      expect((await skipping.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
      expect((await caught(storage.load("orders", "all", 2))).code).toBe("CHECKPOINT_CORRUPT");
    });

    it("ignores a folder left by an interrupted discard, and files and stray names", async () => {
      await mkdir(join(root, "orders", "all", ".discard-chk-0-deadbeef"));
      await mkdir(join(root, "orders", "all", "chk-abc"));
      await writeFile(join(root, "orders", "all", "chk-0000000003"), "a file, not a folder");
      await mkdir(join(root, "orders", ".hidden-scope", checkpointDirectoryName(4)), { recursive: true });

      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
    });
  });

  describe("corruption", () => {
    beforeEach(async () => {
      await storage.store(
        createTestCheckpoint({ jobId: "orders", checkpointId: 5, states: ["subtask zero", "one"] }),
      );
    });

    it("a state file with flipped bytes fails its SHA-256 check", async () => {
      const file = join(chkDir(root, 5), "subtask-0.state");
      await writeFile(file, "subtask ZERO");
      const error = await caught(storage.load("orders", "all", 5));
      expect(error.code).toBe("CHECKPOINT_CORRUPT");
      expect(error.checkpointId).toBe(5);
      expect(error.message).toMatch(/subtask 0 fails its SHA-256 check/);
    });

    it("a truncated state file fails its size check", async () => {
      await truncate(join(chkDir(root, 5), "subtask-1.state"), 1);
      const error = await caught(storage.load("orders", "all", 5));
      expect(error.code).toBe("CHECKPOINT_CORRUPT");
      expect(error.message).toMatch(/has 1 bytes, the metadata says 3/);
    });

    it("a missing state file is corruption", async () => {
      await rm(join(chkDir(root, 5), "subtask-1.state"));
      const error = await caught(storage.load("orders", "all", 5));
      expect(error.code).toBe("CHECKPOINT_CORRUPT");
      expect(error.message).toMatch(/subtask 1 is missing/);
    });

    it("metadata whose checksum was edited does not match the state", async () => {
      const file = join(chkDir(root, 5), METADATA_FILE_NAME);
      const metadata = JSON.parse(await readFile(file, "utf8"));
      metadata.subtasks[1].sha256 = checksumOf(Buffer.from("two"));
      await writeFile(file, JSON.stringify(metadata));
      expect((await caught(storage.load("orders", "all", 5))).code).toBe("CHECKPOINT_CORRUPT");
    });

    it("verify reports each state file instead of stopping at the first problem", async () => {
      expect((await storage.verify("orders", "all", 5)).ok).toBe(true);
      await writeFile(join(chkDir(root, 5), "subtask-1.state"), "uno");
      const report = await storage.verify("orders", "all", 5);
      expect(report.ok).toBe(false);
      expect(report.path).toBe(chkDir(root, 5));
      expect(report.subtasks.map((s) => [s.subtaskIndex, s.ok, s.actualBytes])).toEqual([
        [0, true, 12],
        [1, false, 3],
      ]);
      expect(report.subtasks[1]?.problem).toMatch(/SHA-256/);
      expect((await caught(storage.verify("orders", "all", 6))).code).toBe("CHECKPOINT_NOT_FOUND");
    });
  });

  describe("writing and discarding", () => {
    it("leaves no temporary folder behind, also when a store is refused", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
      await caught(storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 })));
      await caught(
        storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2, summary: { big: 1n } })),
      );
      expect(await readdir(join(root, "orders", "all"))).toEqual([checkpointDirectoryName(1)]);
    });

    it("fails with CHECKPOINT_FAILED when the folder cannot be written", async () => {
      // A file where the job's folder should be: mkdir fails whoever runs the test (root included).
      await writeFile(join(root, "blocked"), "not a folder");
      const error = await caught(storage.store(createTestCheckpoint({ jobId: "blocked", checkpointId: 1 })));
      expect(error.code).toBe("CHECKPOINT_FAILED");
      expect(error.checkpointId).toBe(1);
      expect(error.cause).toBeDefined();
    });

    it("discard removes the folder entirely", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
      await storage.discard("orders", "all", 1);
      expect(await readdir(join(root, "orders", "all"))).toEqual([checkpointDirectoryName(2)]);
    });

    it("sorts ids numerically past the padding", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 12_345_678_901 }));
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 9 }));
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([9, 12_345_678_901]);
      expect((await storage.load("orders", "all", 12_345_678_901)).metadata.checkpointId).toBe(
        12_345_678_901,
      );
    });
  });

  describe("cleanupPartialCheckpoints", () => {
    async function leftovers(): Promise<{ oldTemp: string; youngTemp: string; oldDiscard: string }> {
      const scopeDir = join(root, "orders", "all");
      const oldTemp = join(scopeDir, ".tmp-chk-3-old");
      const youngTemp = join(scopeDir, ".tmp-chk-4-young");
      const oldDiscard = join(scopeDir, ".discard-chk-1-old");
      for (const dir of [oldTemp, youngTemp, oldDiscard]) {
        await mkdir(dir, { recursive: true });
        await writeFile(join(dir, "subtask-0.state"), "partial");
      }
      const twoMinutesAgo = new Date(Date.now() - 120_000);
      await utimes(oldTemp, twoMinutesAgo, twoMinutesAgo);
      await utimes(oldDiscard, twoMinutesAgo, twoMinutesAgo);
      return { oldTemp, youngTemp, oldDiscard };
    }

    it("removes leftovers older than a minute and keeps younger ones, which may be in progress", async () => {
      // Stored first: the first store of a scope would clean up by itself.
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
      const { oldTemp, youngTemp, oldDiscard } = await leftovers();
      expect(await storage.cleanupPartialCheckpoints()).toEqual([oldDiscard, oldTemp].sort());
      expect((await stat(youngTemp)).isDirectory()).toBe(true);
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([2]);
    });

    it("removes every leftover with olderThanMs 0, and only of the job asked for", async () => {
      const { youngTemp } = await leftovers();
      const otherJobTemp = join(root, "payments", "all", ".tmp-chk-1-x");
      await mkdir(otherJobTemp, { recursive: true });
      const removed = await storage.cleanupPartialCheckpoints({ jobId: "orders", olderThanMs: 0 });
      expect(removed).toHaveLength(3);
      expect(removed).toContain(youngTemp);
      expect(await readdir(join(root, "orders", "all"))).toEqual([]);
      expect((await stat(otherJobTemp)).isDirectory()).toBe(true);
      await expect(storage.cleanupPartialCheckpoints({ olderThanMs: -1 })).rejects.toBeInstanceOf(
        ConfigurationError,
      );
    });

    it("runs by itself on the first store of a scope", async () => {
      const { oldTemp, youngTemp } = await leftovers();
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 5 }));
      await expect(stat(oldTemp)).rejects.toThrow();
      expect((await stat(youngTemp)).isDirectory()).toBe(true);
    });

    it("does nothing on an empty or missing root", async () => {
      expect(
        await filesystem(join(root, "does-not-exist")).cleanupPartialCheckpoints({ olderThanMs: 0 }),
      ).toEqual([]);
      expect(await filesystem(join(root, "does-not-exist")).list("orders")).toEqual([]);
    });
  });
});

describe("FileSystemCheckpointStorage incarnations on disk", () => {
  it("a marker left without its scope (a delete cut short by SIGKILL) keeps its number and blocks nothing", async () => {
    const root = await mkdtemp(join(tmpdir(), "onceflow-fs-incarnations-"));
    const storage = filesystem(root);
    const first = await storage.claimIncarnation("orders", "all");
    await mkdir(join(root, "orders", ".incarnations", String(first + 1)));
    const next = await filesystem(root).claimIncarnation("orders", "all");
    expect(next).toBe(first + 2);
    await filesystem(root).store(
      createTestCheckpoint({ jobId: "orders", checkpointId: 1, incarnation: next }),
    );
    expect((await filesystem(root).list("orders")).map((metadata) => metadata.checkpointId)).toEqual([1]);
    await rm(root, { recursive: true, force: true });
  });
});

describe("FileSystemCheckpointStorage incarnation series", () => {
  it("starts a new series when the job's folder is deleted (a reset)", async () => {
    const root = await newRoot();
    const storage = filesystem(root);
    await storage.claimIncarnation("orders", "all");
    const before = await storage.describeIncarnations("orders");
    expect(before.newest).toBe(1);
    expect(await storage.claimedScopes("orders")).toEqual(["all"]);
    await rm(join(root, "orders"), { recursive: true, force: true });
    expect(await storage.claimIncarnation("orders", "all")).toBe(1);
    const after = await storage.describeIncarnations("orders");
    expect(after.newest).toBe(1);
    expect(after.series).not.toBe(before.series);
    expect(await filesystem(root).describeIncarnations("orders")).toEqual(after);
  });
});
