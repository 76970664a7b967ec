import {
  CheckpointError,
  type CheckpointStorage,
  CollectedOutput,
  type CompletedCheckpoint,
  ConfigurationError,
  checksumOf,
  createTestCheckpoint,
  GeneratorSource,
  Job,
  type RestoreSetting,
  retainLatestCheckpoints,
} from "@onceflow/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkpointHistoryCases } from "./checkpoint-history-contract.js";

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
  /**
   * Opens a second instance on the same stored data (same folder, same tables), as another process
   * would. When given, the contract checks that incarnations are shared through the stored data: a
   * claim made through one instance fences stores and claims made through the other. The contract
   * closes the instance it gets.
   */
  readonly reopen?: (storage: S) => Promise<S>;
  /** Called after each test, for example to drop a schema. */
  readonly cleanup?: (storage: S) => Promise<void>;
}

async function expectCheckpointError(promise: Promise<unknown>, code: string): Promise<CheckpointError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error, `expected a CheckpointError ${code}`).toBeInstanceOf(CheckpointError);
  expect((error as CheckpointError).code, `code of: ${(error as Error).message}`).toBe(code);
  return error as CheckpointError;
}

/** A test checkpoint of a job (default `orders`) written by `incarnation`. */
function incarnationCheckpoint(
  checkpointId: number,
  scope: string,
  incarnation: number,
  jobId = "orders",
): CompletedCheckpoint {
  const checkpoint = createTestCheckpoint({
    jobId,
    checkpointId,
    scope,
    states: [`${scope}@${checkpointId}#${incarnation}`],
    parallelism: 2,
    subtaskIndexes: [scope === "subtask-1-of-2" ? 1 : 0],
  });
  return { metadata: { ...checkpoint.metadata, incarnation }, subtaskStates: checkpoint.subtaskStates };
}

/**
 * The behaviour every {@link CheckpointStorage} must have, as a vitest suite: round trips, ordering,
 * atomic refusal of bad input, copies not shared buffers, idempotent discard, isolation of jobs and
 * scopes, safe names, retention, incarnations (`claimIncarnation`: numbers growing job-wide, fencing
 * of older incarnations' stores, `after`, concurrent claims, stores racing a claim; `describeIncarnations`:
 * one series per storage and job, the newest number), the checkpoint history (`recordHistory`,
 * `readHistory`: kept past retention, bounded per scope), with a `reopen`
 * hook incarnations shared between instances, and with a `corrupt` hook corruption detection. Run it
 * on your own storage from a vitest file; this repository runs it on the memory, filesystem and
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

    it("keeps what a lineage's base records: a job started again with the same named checkpoint goes on from the latest", async () => {
      const output = new CollectedOutput<number>();
      const run = (restore: RestoreSetting) => {
        const job = new Job({
          jobId: "restore-once",
          checkpointing: { interval: 60_000, storage },
          restartStrategy: { type: "none" },
          restore,
        });
        job
          .fromSource(new GeneratorSource<number>({ count: 20, generate: (index) => index }), {
            uid: "numbers",
          })
          .sinkTo(output.sinkFactory(), { uid: "out" });
        return job.execute();
      };
      const first = await run("latest");
      const named: RestoreSetting = { checkpointId: first.lastCheckpointId };
      const second = await run(named);
      // The restore is recorded in the base checkpoint of the lineage it started, in this storage.
      const base = (await storage.list("restore-once")).find((metadata) => metadata.scope === "base");
      expect(base?.summary.base).toMatchObject({ startedBy: named });
      expect(second.restoredCheckpointId).toBe(base?.checkpointId);
      // A restart with the same setting (a pod restarted with the same arguments) reads the record back.
      const third = await run(named);
      expect(third.restoredCheckpointId).toBe(second.lastCheckpointId);
      expect(output.committed.sort((left, right) => left - right)).toEqual(
        Array.from({ length: 20 }, (_, index) => index),
      );
    });

    describe("claimIncarnation", () => {
      const A = "subtask-0-of-2";
      const B = "subtask-1-of-2";
      const listedIn = async (scope: string): Promise<number[]> =>
        (await storage.list("orders")).filter((m) => m.scope === scope).map((m) => m.checkpointId);

      it("hands out numbers that grow job-wide, across scopes", async () => {
        const claimed: number[] = [];
        for (const scope of [A, B, A, "base", B, A])
          claimed.push(await storage.claimIncarnation("orders", scope));
        for (const [index, incarnation] of claimed.entries()) {
          expect(Number.isSafeInteger(incarnation), `incarnation ${incarnation}`).toBe(true);
          if (index > 0) expect(incarnation).toBeGreaterThan(claimed[index - 1]!);
        }
        const other = await storage.claimIncarnation("payments", A);
        expect(Number.isSafeInteger(other)).toBe(true);
        expect(await storage.claimIncarnation("orders", B)).toBeGreaterThan(claimed.at(-1)!);
      });

      it("fences the scope's older incarnations: their stores fail with SUPERSEDED and are not listed", async () => {
        const first = await storage.claimIncarnation("orders", A);
        await storage.store(incarnationCheckpoint(1, A, first));
        const second = await storage.claimIncarnation("orders", A);
        const error = await expectCheckpointError(
          storage.store(incarnationCheckpoint(2, A, first)),
          "SUPERSEDED",
        );
        expect(error.message).toMatch(/newer/);
        expect(await listedIn(A)).toEqual([1]);
        await storage.store(incarnationCheckpoint(2, A, second));
        expect(await listedIn(A)).toEqual([1, 2]);
        expect((await storage.load("orders", A, 2)).metadata.incarnation).toBe(second);
        // Fenced for good: a third claim fences the second too.
        await storage.claimIncarnation("orders", A);
        await expectCheckpointError(storage.store(incarnationCheckpoint(3, A, first)), "SUPERSEDED");
        await expectCheckpointError(storage.store(incarnationCheckpoint(3, A, second)), "SUPERSEDED");
        expect(await listedIn(A)).toEqual([1, 2]);
      });

      it("fences a base checkpoint with the scope of the process that writes it (incarnationScope)", async () => {
        // A process of scope A starts a new lineage and writes its base (scope "base"); a process
        // frozen meanwhile whose scope A was claimed again must not land a base of its own.
        const base = (checkpointId: number, incarnation: number): CompletedCheckpoint => {
          const checkpoint = createTestCheckpoint({
            jobId: "orders",
            checkpointId,
            scope: "base",
            states: ["b0", "b1"],
          });
          return {
            metadata: { ...checkpoint.metadata, incarnation, incarnationScope: A, lineage: checkpointId },
            subtaskStates: checkpoint.subtaskStates,
          };
        };
        const frozen = await storage.claimIncarnation("orders", A);
        const replacement = await storage.claimIncarnation("orders", A);
        const error = await expectCheckpointError(storage.store(base(3, frozen)), "SUPERSEDED");
        expect(error.message).toContain(A);
        expect(await listedIn("base")).toEqual([]);
        await storage.store(base(3, replacement));
        expect(await listedIn("base")).toEqual([3]);
        const loaded = await storage.load("orders", "base", 3);
        expect(loaded.metadata).toMatchObject({ incarnation: replacement, incarnationScope: A });
        // Another scope's claim does not fence it.
        await storage.claimIncarnation("orders", B);
        await storage.store(base(4, replacement));
        expect(await listedIn("base")).toEqual([3, 4]);
      });

      it("leaves other scopes and other jobs alone", async () => {
        const inA = await storage.claimIncarnation("orders", A);
        const inB = await storage.claimIncarnation("orders", B);
        const otherJob = await storage.claimIncarnation("payments", A);
        // B's claim has a higher number but fences only B.
        await storage.store(incarnationCheckpoint(1, A, inA));
        await storage.claimIncarnation("orders", A);
        await storage.store(incarnationCheckpoint(1, B, inB));
        await storage.store(incarnationCheckpoint(1, A, otherJob, "payments"));
        expect(await listedIn(A)).toEqual([1]);
        expect(await listedIn(B)).toEqual([1]);
        expect((await storage.list("payments")).map((m) => m.checkpointId)).toEqual([1]);
      });

      it("with after: claims while `after` is still the newest, else fails with SUPERSEDED", async () => {
        const first = await storage.claimIncarnation("orders", A);
        const restarted = await storage.claimIncarnation("orders", A, { after: first });
        expect(restarted).toBeGreaterThan(first);
        // A zombie restarting after `first` must not fence `restarted`.
        await expectCheckpointError(storage.claimIncarnation("orders", A, { after: first }), "SUPERSEDED");
        await storage.store(incarnationCheckpoint(1, A, restarted));
        expect(await listedIn(A)).toEqual([1]);
        // Another scope's newest does not count, nor does a scope never claimed.
        const inB = await storage.claimIncarnation("orders", B);
        await expectCheckpointError(storage.claimIncarnation("orders", A, { after: inB }), "SUPERSEDED");
        await expectCheckpointError(
          storage.claimIncarnation("orders", "subtask-9-of-10", { after: 1 }),
          "SUPERSEDED",
        );
        await storage.store(incarnationCheckpoint(2, A, restarted));
        expect(await storage.claimIncarnation("orders", A, { after: restarted })).toBeGreaterThan(inB);
      });

      it("concurrent claims of one scope: exactly one ends newest, the others' stores are refused", async () => {
        const base = await storage.claimIncarnation("orders", A);
        // Restarts racing after the same incarnation: exactly one may win.
        const restarts = await Promise.allSettled(
          Array.from({ length: 5 }, () => storage.claimIncarnation("orders", A, { after: base })),
        );
        const won = restarts.filter((r) => r.status === "fulfilled");
        expect(won, "claims after the same incarnation that succeeded").toHaveLength(1);
        for (const lost of restarts.filter((r) => r.status === "rejected")) {
          expect((lost as PromiseRejectedResult).reason).toBeInstanceOf(CheckpointError);
          expect(((lost as PromiseRejectedResult).reason as CheckpointError).code).toBe("SUPERSEDED");
        }
        // Plain claims racing: each succeeds or fails with SUPERSEDED; only the newest may store.
        const claims = await Promise.allSettled(
          Array.from({ length: 5 }, () => storage.claimIncarnation("orders", A)),
        );
        const numbers: number[] = [];
        for (const claim of claims) {
          if (claim.status === "fulfilled") numbers.push(claim.value);
          else expect((claim.reason as CheckpointError).code).toBe("SUPERSEDED");
        }
        expect(numbers.length).toBeGreaterThan(0);
        expect(new Set(numbers).size).toBe(numbers.length);
        const incarnations = [base, (won[0] as PromiseFulfilledResult<number>).value, ...numbers];
        const stores = await Promise.allSettled(
          incarnations.map((incarnation, index) =>
            storage.store(incarnationCheckpoint(index + 1, A, incarnation)),
          ),
        );
        const landed = stores.flatMap((result, index) => (result.status === "fulfilled" ? [index + 1] : []));
        expect(landed, "stores that landed, by checkpoint id").toHaveLength(1);
        expect(incarnations[landed[0]! - 1]).toBe(Math.max(...incarnations));
        for (const result of stores.filter((r) => r.status === "rejected")) {
          expect(((result as PromiseRejectedResult).reason as CheckpointError).code).toBe("SUPERSEDED");
        }
        expect(await listedIn(A)).toEqual(landed);
      });

      it("a store racing a claim either lands (and is listed) or fails with SUPERSEDED", async () => {
        let incarnation = await storage.claimIncarnation("orders", A);
        for (let round = 1; round <= 8; round++) {
          const store = storage.store(incarnationCheckpoint(round, A, incarnation));
          // Start the claim before, with, or after the store's first await.
          const claim = (async () => {
            for (let turn = 0; turn < round % 4; turn++) await Promise.resolve();
            return storage.claimIncarnation("orders", A);
          })();
          const [stored, claimed] = await Promise.allSettled([store, claim]);
          expect(claimed.status).toBe("fulfilled");
          const listed = (await listedIn(A)).includes(round);
          if (stored.status === "fulfilled")
            expect(listed, `checkpoint ${round} stored but not listed`).toBe(true);
          else {
            expect((stored.reason as CheckpointError).code, String(stored.reason)).toBe("SUPERSEDED");
            expect(listed, `checkpoint ${round} refused but listed`).toBe(false);
          }
          // Once the claim resolved, the old incarnation can never store again.
          await expectCheckpointError(
            storage.store(incarnationCheckpoint(100 + round, A, incarnation)),
            "SUPERSEDED",
          );
          incarnation = (claimed as PromiseFulfilledResult<number>).value;
        }
        expect((await listedIn(A)).every((id) => id <= 8)).toBe(true);
      });

      it("does not fence checkpoints without an incarnation", async () => {
        await storage.claimIncarnation("orders", "all");
        await storage.claimIncarnation("orders", "all");
        await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
        expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
        expect((await storage.load("orders", "all", 1)).metadata.incarnation).toBeUndefined();
      });

      if (options.reopen !== undefined) {
        const reopen = options.reopen;
        it("shares incarnations between instances on the same data (a zombie and its replacement)", async () => {
          const zombie = await storage.claimIncarnation("orders", A);
          await storage.store(incarnationCheckpoint(1, A, zombie));
          const other = await reopen(storage);
          try {
            const replacement = await other.claimIncarnation("orders", A);
            expect(replacement).toBeGreaterThan(zombie);
            // The zombie's instance is fenced by the claim made through the other instance.
            await expectCheckpointError(storage.store(incarnationCheckpoint(2, A, zombie)), "SUPERSEDED");
            await expectCheckpointError(
              storage.claimIncarnation("orders", A, { after: zombie }),
              "SUPERSEDED",
            );
            await other.store(incarnationCheckpoint(2, A, replacement));
            expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1, 2]);
            expect(await storage.claimIncarnation("orders", B)).toBeGreaterThan(replacement);
          } finally {
            await other.close?.();
          }
        });
      }

      describe("describeIncarnations", () => {
        it("keeps one series for the job's incarnations, and says the newest one handed out", async () => {
          const before = await storage.describeIncarnations("orders");
          expect(before.newest).toBe(0);
          expect(before.series).toMatch(/\S/);
          await storage.claimIncarnation("orders", A);
          const newest = await storage.claimIncarnation("orders", B);
          expect(await storage.describeIncarnations("orders")).toEqual({ series: before.series, newest });
          expect((await storage.describeIncarnations("returns")).newest).toBe(0);
        });

        it("a new storage counts its incarnations in another series", async () => {
          const series = (await storage.describeIncarnations("orders")).series;
          const other = await createStorage();
          try {
            expect((await other.describeIncarnations("orders")).series).not.toBe(series);
          } finally {
            await options.cleanup?.(other);
            await other.close?.();
          }
        });

        if (options.reopen !== undefined) {
          const reopen = options.reopen;
          it("is the same through every instance on the same data", async () => {
            const series = (await storage.describeIncarnations("orders")).series;
            const other = await reopen(storage);
            try {
              const newest = await other.claimIncarnation("orders", A);
              expect(await storage.describeIncarnations("orders")).toEqual({ series, newest });
              expect(await other.describeIncarnations("orders")).toEqual({ series, newest });
            } finally {
              await other.close?.();
            }
          });
        }
      });

      it("rejects job ids and scopes that are not safe names", async () => {
        for (const bad of ["", "..", "a/b"]) {
          await expect(storage.claimIncarnation(bad, A)).rejects.toBeInstanceOf(ConfigurationError);
          await expect(storage.claimIncarnation("orders", bad)).rejects.toBeInstanceOf(ConfigurationError);
        }
      });
    });

    describe("checkpoint history", () => {
      const reopen = options.reopen;
      checkpointHistoryCases(() => storage, reopen === undefined ? undefined : () => reopen(storage));
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
