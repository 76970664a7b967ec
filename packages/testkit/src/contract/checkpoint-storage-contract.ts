import {
  CheckpointError,
  type CheckpointStorage,
  type CompletedCheckpoint,
  ConfigurationError,
  checksumOf,
  createTestCheckpoint,
  retainLatestCheckpoints,
} from "@onceflow/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

/** Which stored checkpoint a {@link CheckpointStorageContractOptions.corrupt} hook must damage. */
export interface CheckpointAddress {
  readonly jobId: string;
  readonly scope: string;
  readonly checkpointId: number;
  readonly subtaskIndex: number;
}

/** Storage-specific hooks of {@link describeCheckpointStorageContract}. */
export interface CheckpointStorageContractOptions<S extends CheckpointStorage> {
  /**
   * Damages the stored state of one subtask behind the storage's back (flip a byte of the file,
   * update the row …). When given, the contract checks that `load` then fails with `CHECKPOINT_CORRUPT`.
   */
  readonly corrupt?: (storage: S, at: CheckpointAddress) => Promise<void>;
  /** Called after each test, for example to drop a schema. */
  readonly cleanup?: (storage: S) => Promise<void>;
}

async function expectCheckpointError(promise: Promise<unknown>, code: string): Promise<CheckpointError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error, `expected a CheckpointError ${code}`).toBeInstanceOf(CheckpointError);
  expect((error as CheckpointError).code).toBe(code);
  return error as CheckpointError;
}

/**
 * The behaviour every {@link CheckpointStorage} must have, as a vitest suite: round trips, ordering,
 * atomic refusal of bad input, copies not shared buffers, idempotent discard, isolation of jobs and
 * scopes, safe names, retention, and (with a `corrupt` hook) corruption detection. Run it on
 * your own storage from a vitest file; this repository runs it on the memory, filesystem and
 * PostgreSQL storages.
 *
 * @example
 * ```ts
 * describeCheckpointStorageContract("MemoryCheckpointStorage", async () => new MemoryCheckpointStorage());
 * ```
 */
export function describeCheckpointStorageContract<S extends CheckpointStorage>(
  name: string,
  createStorage: () => Promise<S>,
  options: CheckpointStorageContractOptions<S> = {},
): void {
  describe(`${name} (CheckpointStorage contract)`, () => {
    let storage: S;
    beforeEach(async () => {
      storage = await createStorage();
    });
    afterEach(async () => {
      await options.cleanup?.(storage);
      await storage.close?.();
    });

    it("has a description", () => {
      expect(storage.description.length).toBeGreaterThan(0);
    });

    it("lists nothing for a job it has never seen", async () => {
      expect(await storage.list("never-seen")).toEqual([]);
    });

    it("gives back exactly what was stored", async () => {
      const summary = { operators: ["kafka-source", "count", "file-sink"], splits: { "orders-0": "42" } };
      const checkpoint = createTestCheckpoint({
        jobId: "orders",
        checkpointId: 7,
        states: ["zero", Buffer.alloc(0), Buffer.from([0, 255, 1, 254])],
        isFinal: true,
        summary,
      });
      await storage.store(checkpoint);

      expect(await storage.list("orders")).toEqual([checkpoint.metadata]);
      const loaded = await storage.load("orders", "all", 7);
      expect(loaded.metadata).toEqual(checkpoint.metadata);
      expect([...loaded.subtaskStates.keys()].sort()).toEqual([0, 1, 2]);
      expect(loaded.subtaskStates.get(0)?.toString()).toBe("zero");
      expect(loaded.subtaskStates.get(1)?.length).toBe(0);
      expect([...(loaded.subtaskStates.get(2) ?? [])]).toEqual([0, 255, 1, 254]);
      expect(Buffer.isBuffer(loaded.subtaskStates.get(2))).toBe(true);
    });

    it("lists by checkpoint id, then scope", async () => {
      for (const [checkpointId, scope] of [
        [12, "subtask-1-of-2"],
        [3, "subtask-1-of-2"],
        [12, "subtask-0-of-2"],
        [10, "subtask-0-of-2"],
      ] as const) {
        await storage.store(
          createTestCheckpoint({
            jobId: "orders",
            checkpointId,
            scope,
            states: [`s${checkpointId}`],
            parallelism: 2,
          }),
        );
      }
      const listed = (await storage.list("orders")).map((m) => `${m.checkpointId}/${m.scope}`);
      expect(listed).toEqual([
        "3/subtask-1-of-2",
        "10/subtask-0-of-2",
        "12/subtask-0-of-2",
        "12/subtask-1-of-2",
      ]);
    });

    it("keeps its own copies of the state buffers", async () => {
      const checkpoint = createTestCheckpoint({ jobId: "orders", checkpointId: 1, states: ["abc"] });
      await storage.store(checkpoint);
      checkpoint.subtaskStates.get(0)?.fill(0x7a);

      const first = await storage.load("orders", "all", 1);
      expect(first.subtaskStates.get(0)?.toString()).toBe("abc");
      first.subtaskStates.get(0)?.fill(0x7a);
      expect((await storage.load("orders", "all", 1)).subtaskStates.get(0)?.toString()).toBe("abc");
    });

    it("fails with CHECKPOINT_NOT_FOUND for a checkpoint that does not exist", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
      const error = await expectCheckpointError(storage.load("orders", "all", 2), "CHECKPOINT_NOT_FOUND");
      expect(error.checkpointId).toBe(2);
      await expectCheckpointError(storage.load("orders", "other-scope", 1), "CHECKPOINT_NOT_FOUND");
      await expectCheckpointError(storage.load("other-job", "all", 1), "CHECKPOINT_NOT_FOUND");
    });

    it("refuses to overwrite a completed checkpoint", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 4, states: ["first"] }));
      await expectCheckpointError(
        storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 4, states: ["second"] })),
        "CHECKPOINT_FAILED",
      );
      expect((await storage.load("orders", "all", 4)).subtaskStates.get(0)?.toString()).toBe("first");
      expect(await storage.list("orders")).toHaveLength(1);
    });

    it("refuses a checkpoint whose metadata does not describe its state, and stores nothing", async () => {
      const good = createTestCheckpoint({ jobId: "orders", checkpointId: 5, states: ["abc", "def"] });
      const wrongChecksum: CompletedCheckpoint = {
        metadata: {
          ...good.metadata,
          subtasks: good.metadata.subtasks.map((entry) => ({
            ...entry,
            sha256: checksumOf(Buffer.from("x")),
          })),
        },
        subtaskStates: good.subtaskStates,
      };
      await expectCheckpointError(storage.store(wrongChecksum), "CHECKPOINT_FAILED");
      const missingState: CompletedCheckpoint = {
        metadata: good.metadata,
        subtaskStates: new Map([[0, Buffer.from("abc")]]),
      };
      await expectCheckpointError(storage.store(missingState), "CHECKPOINT_FAILED");
      const extraState: CompletedCheckpoint = {
        metadata: good.metadata,
        subtaskStates: new Map([...good.subtaskStates, [9, Buffer.from("extra")]]),
      };
      await expectCheckpointError(storage.store(extraState), "CHECKPOINT_FAILED");
      const notJson = createTestCheckpoint({ jobId: "orders", checkpointId: 5, summary: { offset: 10n } });
      await expectCheckpointError(storage.store(notJson), "CHECKPOINT_FAILED");

      expect(await storage.list("orders")).toEqual([]);
      await storage.store(good);
      expect(await storage.list("orders")).toHaveLength(1);
    });

    it("discards one checkpoint, and discarding a missing one does nothing", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }));
      await storage.discard("orders", "all", 1);
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([2]);
      await expectCheckpointError(storage.load("orders", "all", 1), "CHECKPOINT_NOT_FOUND");
      await storage.discard("orders", "all", 1);
      await storage.discard("orders", "all", 99);
      await storage.discard("unknown-job", "all", 1);
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([2]);
      expect((await storage.load("orders", "all", 2)).metadata.checkpointId).toBe(2);
    });

    it("keeps jobs apart", async () => {
      await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1, states: ["o"] }));
      await storage.store(createTestCheckpoint({ jobId: "payments", checkpointId: 1, states: ["p"] }));
      expect((await storage.list("orders")).map((m) => m.jobId)).toEqual(["orders"]);
      await storage.discard("payments", "all", 1);
      expect((await storage.load("orders", "all", 1)).subtaskStates.get(0)?.toString()).toBe("o");
      expect(await storage.list("payments")).toEqual([]);
    });

    it("lets scopes store, list, load and discard concurrently without interfering", async () => {
      const parallelism = 4;
      const scopes = Array.from({ length: parallelism }, (_, i) => `subtask-${i}-of-${parallelism}`);
      await Promise.all(
        scopes.flatMap((scope, i) =>
          [1, 2, 3].map((checkpointId) =>
            storage.store(
              createTestCheckpoint({
                jobId: "orders",
                checkpointId,
                scope,
                states: [`${scope}@${checkpointId}`],
                subtaskIndexes: [i],
                parallelism,
              }),
            ),
          ),
        ),
      );
      expect(await storage.list("orders")).toHaveLength(12);
      await Promise.all([
        storage.discard("orders", scopes[0]!, 1),
        storage.store(
          createTestCheckpoint({
            jobId: "orders",
            checkpointId: 4,
            scope: scopes[1]!,
            states: ["late"],
            subtaskIndexes: [1],
            parallelism,
          }),
        ),
        ...scopes.map((scope) => storage.load("orders", scope, 3)),
      ]);
      const listed = await storage.list("orders");
      expect(listed).toHaveLength(12);
      for (const [i, scope] of scopes.entries()) {
        const loaded = await storage.load("orders", scope, 2);
        expect(loaded.metadata.scope).toBe(scope);
        expect(loaded.subtaskStates.get(i)?.toString()).toBe(`${scope}@2`);
      }
      expect(listed.filter((m) => m.scope === scopes[0]).map((m) => m.checkpointId)).toEqual([2, 3]);
      expect(listed.filter((m) => m.scope === scopes[1]).map((m) => m.checkpointId)).toEqual([1, 2, 3, 4]);
    });

    it("rejects job ids and scopes that are not safe names", async () => {
      for (const bad of ["", "..", ".hidden", "a/b", "a\\b", "x".repeat(201), "tab\there"]) {
        await expect(storage.list(bad)).rejects.toBeInstanceOf(ConfigurationError);
        await expect(storage.load(bad, "all", 1)).rejects.toBeInstanceOf(ConfigurationError);
        await expect(storage.load("orders", bad, 1)).rejects.toBeInstanceOf(ConfigurationError);
        await expect(storage.discard("orders", bad, 1)).rejects.toBeInstanceOf(ConfigurationError);
        await expect(
          storage.store(createTestCheckpoint({ jobId: bad, checkpointId: 1 })),
        ).rejects.toBeInstanceOf(ConfigurationError);
        await expect(
          storage.store(createTestCheckpoint({ jobId: "orders", scope: bad, checkpointId: 1 })),
        ).rejects.toBeInstanceOf(ConfigurationError);
      }
      await expect(storage.load("orders", "all", -1)).rejects.toBeInstanceOf(ConfigurationError);
      await expect(storage.load("orders", "all", 1.5)).rejects.toBeInstanceOf(ConfigurationError);
      expect(await storage.list("orders")).toEqual([]);
    });

    it("retention keeps the last N checkpoints of each scope", async () => {
      for (const checkpointId of [1, 2, 3, 4, 5]) {
        await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId, scope: "subtask-0-of-2" }));
      }
      for (const checkpointId of [2, 4]) {
        await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId, scope: "subtask-1-of-2" }));
      }
      await storage.store(createTestCheckpoint({ jobId: "payments", checkpointId: 1 }));

      const discarded = await retainLatestCheckpoints(storage, "orders", 3);
      expect(discarded.map((m) => `${m.checkpointId}/${m.scope}`)).toEqual([
        "1/subtask-0-of-2",
        "2/subtask-0-of-2",
      ]);
      const left = (await storage.list("orders")).map((m) => `${m.checkpointId}/${m.scope}`);
      expect(left).toEqual([
        "2/subtask-1-of-2",
        "3/subtask-0-of-2",
        "4/subtask-0-of-2",
        "4/subtask-1-of-2",
        "5/subtask-0-of-2",
      ]);

      await retainLatestCheckpoints(storage, "orders", 1, { scope: "subtask-1-of-2" });
      expect((await storage.list("orders")).map((m) => `${m.checkpointId}/${m.scope}`)).toEqual([
        "3/subtask-0-of-2",
        "4/subtask-0-of-2",
        "4/subtask-1-of-2",
        "5/subtask-0-of-2",
      ]);
      expect(await storage.list("payments")).toHaveLength(1);
      await expect(retainLatestCheckpoints(storage, "orders", 0)).rejects.toBeInstanceOf(ConfigurationError);
      expect(await storage.list("orders")).toHaveLength(4);
    });

    if (options.corrupt !== undefined) {
      const corrupt = options.corrupt;
      it("fails with CHECKPOINT_CORRUPT rather than return damaged state", async () => {
        await storage.store(
          createTestCheckpoint({ jobId: "orders", checkpointId: 8, states: ["good-0", "good-1"] }),
        );
        await storage.store(
          createTestCheckpoint({ jobId: "orders", checkpointId: 9, states: ["good-0", "good-1"] }),
        );
        await corrupt(storage, { jobId: "orders", scope: "all", checkpointId: 8, subtaskIndex: 1 });
        const error = await expectCheckpointError(storage.load("orders", "all", 8), "CHECKPOINT_CORRUPT");
        expect(error.checkpointId).toBe(8);
        expect((await storage.load("orders", "all", 9)).subtaskStates.get(1)?.toString()).toBe("good-1");
      });
    }
  });
}
