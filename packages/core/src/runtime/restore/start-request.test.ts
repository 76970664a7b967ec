import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { CheckpointStorage, CompletedCheckpoint } from "../../checkpoint/checkpoint-storage.js";
import { createCompletedCheckpoint } from "../../checkpoint/completed-checkpoint.js";
import { filesystem } from "../../checkpoint/filesystem-checkpoint-storage.js";
import { MemoryCheckpointStorage } from "../../checkpoint/memory-checkpoint-storage.js";
import { CheckpointError } from "../../errors/onceflow-error.js";
import { createMemoryLogger, type Logger } from "../../observability/logger.js";
import { CollectedOutput } from "../../sink/collect-sink.js";
import { GeneratorSource } from "../../source/generator-source.js";
import { Job, type JobResult } from "../job.js";
import { type Counted, type Reading, RunningCount } from "../testing/running-count.js";
import type { RestoreSetting } from "./restore-plan.js";

// `restore: "none"` and `restore: { checkpointId }` start a lineage of their own and are applied
// once (invariant 10): a process started again with the same setting — a restarted pod, a sibling
// of the process that applied it — goes on from the latest checkpoint of that lineage.

const KEYS = 12;
const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

interface Deployment {
  readonly jobId: string;
  readonly storage: CheckpointStorage;
  readonly output: CollectedOutput<Counted>;
  readonly records: number;
}

function deployment(records: number, storage: CheckpointStorage = new MemoryCheckpointStorage()): Deployment {
  return { jobId: "start-request", storage, output: new CollectedOutput(), records };
}

function process(
  target: Deployment,
  options: {
    parallelism?: number;
    subtaskIndex?: number;
    restore?: RestoreSetting;
    recordsPerSecond?: number;
    logger?: Logger;
    restarts?: boolean;
  },
): Job {
  const job = new Job({
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    jobId: target.jobId,
    parallelism: options.parallelism ?? 1,
    ...(options.subtaskIndex === undefined ? {} : { subtaskIndex: options.subtaskIndex }),
    checkpointing: { interval: 50, storage: target.storage },
    restartStrategy: options.restarts ? { type: "fixed-delay", attempts: 3, delay: 10 } : { type: "none" },
    ...(options.restore === undefined ? {} : { restore: options.restore }),
  });
  job
    .fromSource(
      new GeneratorSource<Reading>({
        count: target.records,
        splits: 6,
        generate: (index) => ({ index, key: `key-${index % KEYS}` }),
        recordsPerSecond: options.recordsPerSecond ?? 3_000,
      }),
      { uid: "readings" },
    )
    // One process per subtask has no exchange: key i%12 always reads on split i%6, so the input is
    // partitioned by the key already.
    .reinterpretAsKeyedStream((reading) => reading.key)
    .process(() => new RunningCount(), { uid: "count" })
    .sinkTo(target.output.sinkFactory(), { uid: "out" });
  return job;
}

/** Runs a job until `more` further records are committed, then stops it with a final checkpoint. */
async function runUntil(target: Deployment, job: Job, more: number): Promise<JobResult> {
  const goal = target.output.committed.length + more;
  const run = job.execute();
  await vi.waitFor(() => expect(target.output.committed.length).toBeGreaterThan(goal), { timeout: 15_000 });
  job.stop();
  return run;
}

/** Every input exactly once, and per key the counts 1..n: state went on, never back. */
function expectExactlyOnce(target: Deployment): void {
  const committed = target.output.committed;
  expect(new Set(committed.map((record) => record.index)).size).toBe(target.records);
  expect(committed).toHaveLength(target.records);
  const countsByKey = new Map<string, number[]>();
  for (const record of committed)
    countsByKey.set(record.key, [...(countsByKey.get(record.key) ?? []), record.count]);
  for (const [key, counts] of countsByKey) {
    const expected = Array.from({ length: target.records / KEYS }, (_, index) => index + 1);
    expect(
      [...counts].sort((a, b) => a - b),
      key,
    ).toEqual(expected);
  }
}

const idsOf = async (target: Deployment, scope: string): Promise<number[]> =>
  (await target.storage.list(target.jobId))
    .filter((metadata) => metadata.scope === scope)
    .map((metadata) => metadata.checkpointId);

const basesOf = async (target: Deployment) =>
  (await target.storage.list(target.jobId)).filter((metadata) => metadata.scope === "base");

async function runTogether(target: Deployment, parallelism: number, more: number): Promise<JobResult[]> {
  const jobs = Array.from({ length: parallelism }, (_, index) =>
    process(target, { parallelism, subtaskIndex: index }),
  );
  const goal = target.output.committed.length + more;
  const runs = jobs.map((job) => job.execute());
  await vi.waitFor(() => expect(target.output.committed.length).toBeGreaterThan(goal), { timeout: 15_000 });
  for (const job of jobs) job.stop();
  return Promise.all(runs);
}

describe('restore "none" starts a lineage of its own', () => {
  it("at a parallelism the job ran at before, no process of it restores that earlier lineage's checkpoints", async () => {
    const target = deployment(1_000_000);
    await runTogether(target, 3, 300); // lineage 0 at parallelism 3
    const firstDeployment = Math.max(...(await idsOf(target, "subtask-2-of-3")));
    await runTogether(target, 2, 300); // a rescale to 2: a lineage from a base
    // Back to 3, starting over: process 0 starts empty and stores a checkpoint.
    const highest = Math.max(...(await target.storage.list(target.jobId)).map((m) => m.checkpointId));
    const zero = process(target, {
      parallelism: 3,
      subtaskIndex: 0,
      restore: "none",
      recordsPerSecond: 2_000,
    });
    const zeroRun = zero.execute();
    await vi.waitFor(
      async () => expect(Math.max(...(await idsOf(target, "subtask-0-of-3")))).toBeGreaterThan(highest),
      { timeout: 15_000 },
    );
    // Process 2 restores "latest", as its in-process restart does: it must not get its own scope's
    // checkpoint of the first deployment (old positions, keyed state, pending transactions).
    const two = process(target, { parallelism: 3, subtaskIndex: 2 });
    const twoRun = two.execute();
    await vi.waitFor(
      async () => expect(Math.max(...(await idsOf(target, "subtask-2-of-3")))).toBeGreaterThan(highest),
      { timeout: 15_000 },
    );
    zero.stop();
    two.stop();
    const [zeroResult, twoResult] = await Promise.all([zeroRun, twoRun]);
    const fresh = (await basesOf(target)).at(-1)!;
    expect(fresh.summary.base).toMatchObject({ derivedFrom: [], startedBy: "none" });
    expect(fresh.checkpointId).toBe(highest + 1);
    expect(zeroResult.restoredCheckpointId).toBeUndefined(); // a fresh start restores nothing
    expect(twoResult.restoredCheckpointId).toBeUndefined(); // its share of the empty base: nothing either
    expect(firstDeployment).toBeLessThan(fresh.checkpointId);
  }, 60_000);

  it("fences the processes of other parallelisms, as a rescale does", async () => {
    const target = deployment(600);
    await runTogether(target, 2, 100);
    // A process of the old parallelism that is still alive (it claimed its scope before the redeploy).
    const old = await target.storage.claimIncarnation(target.jobId, "subtask-1-of-2");
    await process(target, {
      parallelism: 3,
      subtaskIndex: 0,
      restore: "none",
      recordsPerSecond: 100_000,
    }).execute();
    const late = createCompletedCheckpoint({
      jobId: target.jobId,
      checkpointId: 10_000,
      scope: "subtask-1-of-2",
      parallelism: 2,
      subtaskStates: new Map([[1, Buffer.from("old")]]),
      incarnation: old,
    });
    await expect(target.storage.store(late)).rejects.toMatchObject({ code: "SUPERSEDED" });
  }, 60_000);

  it("is applied once: a process started again with it goes on from its lineage's latest checkpoint", async () => {
    const before = deployment(3_000);
    await runUntil(before, process(before, {}), 300);
    // The operator starts over, into a new output …
    const target: Deployment = { ...before, output: new CollectedOutput() };
    const fresh = await runUntil(target, process(target, { restore: "none" }), 300);
    // … and the pod restarts with the same setting: it goes on, it does not start over again.
    const restarted = await process(target, { restore: "none" }).execute();
    expect(fresh.restoredCheckpointId).toBeUndefined();
    expect(restarted.restoredCheckpointId).toBe(fresh.lastCheckpointId);
    expectExactlyOnce(target);
  }, 60_000);
});

describe("a named restore is applied once", () => {
  for (const kind of ["memory", "filesystem"] as const) {
    it(`${kind}: a process started again with the same named checkpoint goes on from the latest checkpoint`, async () => {
      let storage: CheckpointStorage = new MemoryCheckpointStorage();
      if (kind === "filesystem") {
        const root = await mkdtemp(join(tmpdir(), "onceflow-start-request-"));
        roots.push(root);
        storage = filesystem(root);
      }
      const target = deployment(3_000, storage);
      const first = await runUntil(target, process(target, {}), 300);
      const named: RestoreSetting = { checkpointId: first.lastCheckpointId };
      const applying = createMemoryLogger();
      const second = await runUntil(target, process(target, { restore: named, logger: applying }), 300);
      // Kubernetes restarts the pod with the same arguments: it must not go back to the named checkpoint.
      const skipping = createMemoryLogger();
      const third = await process(target, { restore: named, logger: skipping }).execute();
      const [base] = await basesOf(target);
      expect(base?.summary.base).toMatchObject({
        startedBy: named,
        derivedFrom: [`all#${first.lastCheckpointId}`],
      });
      expect(second.restoredCheckpointId).toBe(base?.checkpointId);
      expect(third.restoredCheckpointId).toBe(second.lastCheckpointId);
      expect(await basesOf(target)).toHaveLength(1);
      // The log says what was restored, and why the restore was not applied the second time.
      expect(applying.entries).toContainEqual(
        expect.objectContaining({
          level: "info",
          message: expect.stringMatching(
            new RegExp(`^restoring checkpoint ${first.lastCheckpointId} as lineage ${base?.checkpointId}: `),
          ),
        }),
      );
      expect(skipping.entries).toContainEqual(
        expect.objectContaining({
          level: "info",
          message: expect.stringMatching(
            new RegExp(
              `^restore of checkpoint ${first.lastCheckpointId} skipped: it was applied already .* goes on from checkpoint ${second.lastCheckpointId}`,
            ),
          ),
        }),
      );
      expectExactlyOnce(target);
    }, 60_000);
  }

  it("a first attempt that fails while applying it: the restart applies it, it does not fall back to latest", async () => {
    // The storage is briefly unreachable when the new lineage's base is stored.
    class FlakyBaseStore extends MemoryCheckpointStorage {
      private failed = false;
      override async store(checkpoint: CompletedCheckpoint): Promise<void> {
        if (!this.failed && checkpoint.metadata.scope === "base") {
          this.failed = true;
          throw new CheckpointError("CHECKPOINT_FAILED", "the checkpoint storage did not answer");
        }
        return super.store(checkpoint);
      }
    }
    const target = deployment(3_000, new FlakyBaseStore());
    const first = await runUntil(target, process(target, {}), 300);
    const named: RestoreSetting = { checkpointId: first.lastCheckpointId };
    const second = await runUntil(target, process(target, { restore: named, restarts: true }), 300);
    const bases = await basesOf(target);
    expect(second.restarts).toBe(1);
    expect(bases.map((base) => base.summary.base)).toEqual([expect.objectContaining({ startedBy: named })]);
    expect(second.restoredCheckpointId).toBe(bases[0]?.checkpointId);
    await process(target, { restore: named }).execute();
    expectExactlyOnce(target);
  }, 60_000);

  it("carries through a rescale: the pods of the new parallelism, started with the same setting, do not go back", async () => {
    const target = deployment(6_000);
    const first = await runUntil(target, process(target, {}), 300);
    const named: RestoreSetting = { checkpointId: first.lastCheckpointId };
    await runUntil(target, process(target, { restore: named }), 300);
    const jobs = [0, 1].map((index) =>
      process(target, { parallelism: 2, subtaskIndex: index, restore: named }),
    );
    const results = await Promise.all(jobs.map((job) => job.execute()));
    const bases = await basesOf(target);
    expect(bases).toHaveLength(2); // the named restore's, then the rescale's
    expect(bases[1]?.summary.base).toMatchObject({ startedBy: named });
    expect(results.map((result) => result.restoredCheckpointId)).toEqual([
      bases[1]?.checkpointId,
      bases[1]?.checkpointId,
    ]);
    expectExactlyOnce(target);
  }, 60_000);

  it("one process per subtask: a sibling that starts after the first one checkpointed restores the same point", async () => {
    const target = deployment(1_000_000);
    await runTogether(target, 2, 600);
    // Name a checkpoint that subtask 1 has gone past: its state then is what both must restore.
    const ofOne = await idsOf(target, "subtask-1-of-2");
    const named = { checkpointId: ofOne.at(-2)! };
    const zero = process(target, { parallelism: 2, subtaskIndex: 0, restore: named });
    const zeroRun = zero.execute();
    const highest = Math.max(...ofOne, ...(await idsOf(target, "subtask-0-of-2")));
    await vi.waitFor(
      async () => expect(Math.max(...(await idsOf(target, "subtask-0-of-2")))).toBeGreaterThan(highest + 1),
      { timeout: 15_000 },
    );
    // Its sibling starts later: once with the same setting, once as an in-process restart ("latest").
    const restarts: JobResult[] = [];
    for (const restore of [named, "latest"] as const) {
      const one = process(target, { parallelism: 2, subtaskIndex: 1, restore });
      const oneRun = one.execute();
      await vi.waitFor(() => expect(one.status().state).toBe("running"), { timeout: 15_000 });
      one.stop();
      restarts.push(await oneRun);
      // The stop stored a checkpoint of subtask 1 in the new lineage: forget it, so that the second
      // start also finds none of its own (a restart before its first checkpoint).
      for (const id of await idsOf(target, "subtask-1-of-2")) {
        if (id > highest) await target.storage.discard(target.jobId, "subtask-1-of-2", id);
      }
    }
    zero.stop();
    const zeroResult = await zeroRun;
    const bases = await basesOf(target);
    expect(bases).toHaveLength(1);
    expect(bases[0]?.summary.base).toMatchObject({ startedBy: named });
    expect(zeroResult.restoredCheckpointId).toBe(bases[0]?.checkpointId);
    expect(restarts.map((result) => result.restoredCheckpointId)).toEqual([
      bases[0]?.checkpointId,
      bases[0]?.checkpointId,
    ]);
  }, 60_000);

  it("one process per subtask: a process of the old lineage that stores on does not take the job back to it", async () => {
    const target = deployment(1_000_000);
    await runTogether(target, 2, 600);
    const named = { checkpointId: Math.max(...(await idsOf(target, "subtask-0-of-2"))) };
    const applied = await runUntil(
      target,
      process(target, { parallelism: 2, subtaskIndex: 0, restore: named }),
      100,
    );
    const [base] = await basesOf(target);
    // Subtask 1's process of the old lineage stored on after the new lineage was made (a rolling
    // update): a checkpoint of lineage 0 with the job's highest id.
    const oldLatest = Math.max(...(await idsOf(target, "subtask-1-of-2")));
    const old = await target.storage.load(target.jobId, "subtask-1-of-2", oldLatest);
    await target.storage.store(
      createCompletedCheckpoint({
        jobId: target.jobId,
        checkpointId: applied.lastCheckpointId + 50,
        scope: "subtask-1-of-2",
        parallelism: 2,
        subtaskStates: old.subtaskStates,
      }),
    );
    // Process 0 restarted, as an in-process restart ("latest") and as a pod with the same setting:
    // both go on from its latest checkpoint of the new lineage.
    const restarted: JobResult[] = [];
    for (const restore of ["latest", named] as const) {
      const last = restarted.at(-1)?.lastCheckpointId ?? applied.lastCheckpointId;
      const result = await runUntil(
        target,
        process(target, { parallelism: 2, subtaskIndex: 0, restore }),
        50,
      );
      expect(result.restoredCheckpointId).toBe(last);
      restarted.push(result);
    }
    expect((await basesOf(target)).map((metadata) => metadata.checkpointId)).toEqual([base?.checkpointId]);
  }, 60_000);

  it("one process per subtask started at the same moment with the same named checkpoint: one lineage, no record twice", async () => {
    const target = deployment(6_000);
    await runTogether(target, 2, 600);
    // Every process stopped: the newest id is the job's newest point, so restoring it goes back nowhere.
    const newest = Math.max(...(await target.storage.list(target.jobId)).map((m) => m.checkpointId));
    const named = { checkpointId: newest };
    const results = await Promise.all(
      [0, 1].map((index) =>
        process(target, { parallelism: 2, subtaskIndex: index, restore: named }).execute(),
      ),
    );
    const bases = await basesOf(target);
    expect(bases).toHaveLength(1);
    expect(results.map((result) => result.restoredCheckpointId)).toEqual([
      bases[0]?.checkpointId,
      bases[0]?.checkpointId,
    ]);
    expectExactlyOnce(target);
  }, 60_000);

  it("a checkpoint no longer retained for every subtask fails with CHECKPOINT_NOT_FOUND, naming what is kept", async () => {
    const target = deployment(1_000_000);
    await runTogether(target, 2, 600);
    const ofZero = await idsOf(target, "subtask-0-of-2");
    const ofOne = await idsOf(target, "subtask-1-of-2");
    // An id below everything subtask 1 kept: its state at that point is gone.
    const below = Math.min(...ofOne) - 1;
    if (!ofZero.includes(below)) {
      await target.storage.store(
        createCompletedCheckpoint({
          jobId: target.jobId,
          checkpointId: below,
          scope: "subtask-0-of-2",
          parallelism: 2,
          subtaskStates: new Map(),
        }),
      );
    }
    await expect(
      process(target, { parallelism: 2, subtaskIndex: 0, restore: { checkpointId: below } }).execute(),
    ).rejects.toMatchObject({ code: "CHECKPOINT_NOT_FOUND", message: expect.stringContaining("subtask 1") });
  }, 60_000);
});
