import { afterEach, describe, expect, it, vi } from "vitest";
import { createCompletedCheckpoint } from "../../checkpoint/completed-checkpoint.js";
import { MemoryCheckpointStorage } from "../../checkpoint/memory-checkpoint-storage.js";
import { CollectedOutput } from "../../sink/collect-sink.js";
import { GeneratorSource } from "../../source/generator-source.js";
import { Job, type JobResult } from "../job.js";
import { type Counted, type Reading, RunningCount } from "../testing/running-count.js";

// The restore rule with one process per subtask: every process of a
// parallelism restores the same lineage whatever their start order, and "latest" goes by id.

const SPLITS = 6;
const KEYS = 12;

interface Deployment {
  readonly storage: MemoryCheckpointStorage;
  readonly output: CollectedOutput<Counted>;
  readonly records: number;
}

function process(
  deployment: Deployment,
  parallelism: number,
  subtaskIndex: number | undefined,
  recordsPerSecond: number,
  retained = 3,
): Job {
  const job = new Job({
    jobId: "restore-rule",
    parallelism,
    ...(subtaskIndex === undefined ? {} : { subtaskIndex }),
    checkpointing: { interval: 50, storage: deployment.storage, retained },
    restartStrategy: { type: "none" },
  });
  job
    .fromSource(
      new GeneratorSource<Reading>({
        count: deployment.records,
        splits: SPLITS,
        generate: (index) => ({ index, key: `key-${index % KEYS}` }),
        recordsPerSecond,
      }),
      { uid: "readings" },
    )
    // One process per subtask has no exchange: key i%12 always reads on split i%6, so the input is
    // partitioned by the key already.
    .reinterpretAsKeyedStream((reading) => reading.key)
    .process(() => new RunningCount(), { uid: "count" })
    .sinkTo(deployment.output.sinkFactory(), { uid: "out" });
  return job;
}

async function committedMoreThan(deployment: Deployment, count: number): Promise<void> {
  await vi.waitFor(() => expect(deployment.output.committed.length).toBeGreaterThan(count), {
    timeout: 15_000,
  });
}

/** Runs all processes of a parallelism together until `more` further records are committed, then stops them. */
async function runTogether(deployment: Deployment, parallelism: number, more: number): Promise<JobResult[]> {
  const jobs = Array.from({ length: parallelism }, (_, index) =>
    process(deployment, parallelism, index, 3_000),
  );
  const runs = jobs.map((job) => job.execute());
  await committedMoreThan(deployment, deployment.output.committed.length + more);
  for (const job of jobs) job.stop();
  return Promise.all(runs);
}

async function scopeHasCheckpoint(
  storage: MemoryCheckpointStorage,
  scope: string,
  above = 0,
): Promise<boolean> {
  return (await storage.list("restore-rule")).some(
    (metadata) => metadata.scope === scope && metadata.checkpointId > above,
  );
}

/** Every input exactly once, and per key the counts 1..n: keyed state followed its split through every rescale. */
function expectExactlyOnce(deployment: Deployment): void {
  const committed = deployment.output.committed;
  expect(new Set(committed.map((record) => record.index)).size).toBe(deployment.records);
  expect(committed).toHaveLength(deployment.records);
  const countsByKey = new Map<string, number[]>();
  for (const record of committed)
    countsByKey.set(record.key, [...(countsByKey.get(record.key) ?? []), record.count]);
  for (const [key, counts] of countsByKey) {
    const expected = Array.from({ length: deployment.records / KEYS }, (_, index) => index + 1);
    expect(
      [...counts].sort((a, b) => a - b),
      key,
    ).toEqual(expected);
  }
}

afterEach(() => vi.restoreAllMocks());

describe("restore rule with one process per subtask", () => {
  it("2 → 3 processes started one after another (StatefulSet order) all restore the same lineage", async () => {
    const deployment: Deployment = {
      storage: new MemoryCheckpointStorage(),
      output: new CollectedOutput(),
      records: 6_000,
    };
    await runTogether(deployment, 2, 0);
    // Process 0 of the new parallelism starts alone and completes a checkpoint before 1 and 2 start.
    const first = process(deployment, 3, 0, 2_000);
    const firstRun = first.execute();
    await vi.waitFor(
      async () => expect(await scopeHasCheckpoint(deployment.storage, "subtask-0-of-3")).toBe(true),
      {
        timeout: 15_000,
      },
    );
    const later = [1, 2].map((index) => process(deployment, 3, index, 5_000).execute());
    const results = await Promise.all([firstRun, ...later]);
    // Processes 1 and 2 restored their share of the base checkpoint that process 0 created.
    const base = (await deployment.storage.list("restore-rule")).filter(
      (metadata) => metadata.scope === "base",
    );
    expect(base.map((metadata) => metadata.parallelism)).toEqual([3]);
    expect(results.map((result) => result.restoredCheckpointId)).toEqual([
      base[0]!.checkpointId,
      base[0]!.checkpointId,
      base[0]!.checkpointId,
    ]);
    expectExactlyOnce(deployment);
  }, 60_000);

  it("2 → 3 → 2: a process that starts late ignores its own scope's checkpoints from the earlier lineage", async () => {
    const deployment: Deployment = {
      storage: new MemoryCheckpointStorage(),
      output: new CollectedOutput(),
      records: 9_000,
    };
    await runTogether(deployment, 2, 500);
    await runTogether(deployment, 3, 1_500);
    const first = process(deployment, 2, 0, 3_000);
    const firstRun = first.execute();
    const newestBefore = Math.max(
      ...(await deployment.storage.list("restore-rule")).map((m) => m.checkpointId),
    );
    await vi.waitFor(
      async () =>
        expect(await scopeHasCheckpoint(deployment.storage, "subtask-0-of-2", newestBefore)).toBe(true),
      { timeout: 15_000 },
    );
    // subtask-1-of-2 still holds checkpoints of the first lineage: process 1 must not take them.
    expect(await scopeHasCheckpoint(deployment.storage, "subtask-1-of-2")).toBe(true);
    const results = await Promise.all([firstRun, process(deployment, 2, 1, 3_000).execute()]);
    expect(results[1]!.restoredCheckpointId).toBe(results[0]!.restoredCheckpointId);
    expectExactlyOnce(deployment);
  }, 60_000);

  it("the process started first and the one started later agree even when they race to create the lineage", async () => {
    const deployment: Deployment = {
      storage: new MemoryCheckpointStorage(),
      output: new CollectedOutput(),
      records: 6_000,
    };
    await runTogether(deployment, 3, 300);
    const results = await Promise.all([0, 1].map((index) => process(deployment, 2, index, 4_000).execute()));
    const bases = (await deployment.storage.list("restore-rule")).filter(
      (metadata) => metadata.scope === "base",
    );
    expect(bases).toHaveLength(1);
    expect(results.map((result) => result.restoredCheckpointId)).toEqual([
      bases[0]!.checkpointId,
      bases[0]!.checkpointId,
    ]);
    expectExactlyOnce(deployment);
  }, 60_000);
});

describe("restore rule: latest goes by checkpoint id, never by wall clock", () => {
  it("a clock stepped back an hour between runs still restores the newest checkpoint", async () => {
    const deployment: Deployment = {
      storage: new MemoryCheckpointStorage(),
      output: new CollectedOutput(),
      records: 3_000,
    };
    const runFor = async (more: number): Promise<JobResult> => {
      const job = process(deployment, 1, undefined, 3_000, 10);
      const run = job.execute();
      await committedMoreThan(deployment, deployment.output.committed.length + more);
      job.stop();
      return run;
    };
    const firstRun = await runFor(300);
    const realNow = Date.now.bind(Date);
    vi.spyOn(Date, "now").mockImplementation(() => realNow() - 3_600_000); // an NTP step, a VM resume
    const secondRun = await runFor(300);
    vi.restoreAllMocks();
    expect(secondRun.restoredCheckpointId).toBe(firstRun.lastCheckpointId);
    const lastRun = await process(deployment, 1, undefined, 3_000, 10).execute();
    // Checkpoints of the second run carry older completedAt times than the first run's.
    expect(lastRun.restoredCheckpointId).toBe(secondRun.lastCheckpointId);
    expectExactlyOnce(deployment);
  }, 60_000);
});

describe("restore rule: processes of another shape that never stored a checkpoint", () => {
  it("are fenced by a process of a new shape, also when the job has no checkpoint yet", async () => {
    const deployment: Deployment = {
      storage: new MemoryCheckpointStorage(),
      output: new CollectedOutput(),
      records: 600,
    };
    // An old process (parallelism 2) started, and never completed a checkpoint: it may still be alive.
    const old = await deployment.storage.claimIncarnation("restore-rule", "subtask-1-of-2");
    await process(deployment, 3, 0, 10_000).execute();
    const late = createCompletedCheckpoint({
      jobId: "restore-rule",
      checkpointId: 1_000,
      scope: "subtask-1-of-2",
      parallelism: 2,
      subtaskStates: new Map([[1, Buffer.from("old")]]),
      incarnation: old,
    });
    await expect(deployment.storage.store(late)).rejects.toMatchObject({ code: "SUPERSEDED" });
    // Its siblings of the new shape are not fenced: subtask 1 of 3 stores as usual.
    const sibling = await deployment.storage.claimIncarnation("restore-rule", "subtask-1-of-3");
    await process(deployment, 3, 0, 10_000).execute();
    await expect(
      deployment.storage.store(
        createCompletedCheckpoint({
          jobId: "restore-rule",
          checkpointId: 1_001,
          scope: "subtask-1-of-3",
          parallelism: 3,
          subtaskStates: new Map([[1, Buffer.from("new")]]),
          incarnation: sibling,
        }),
      ),
    ).resolves.toBeUndefined();
  }, 30_000);
});

describe("restore rule: a named checkpoint is where the job starts, not where it restarts", () => {
  it("a restart after a failure goes on from the latest checkpoint, not back to the named one", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<number>();
    const build = (options: { restore?: { checkpointId: number }; failAfter?: number }): Job => {
      let failed = false;
      const job = new Job({
        jobId: "named",
        checkpointing: { interval: 50, storage },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 10 },
        ...(options.restore === undefined ? {} : { restore: options.restore }),
      });
      job
        .fromSource(
          new GeneratorSource<number>({
            count: 3_000,
            splits: 2,
            generate: (index) => index,
            recordsPerSecond: 3_000,
          }),
          {
            uid: "numbers",
          },
        )
        .map((value) => {
          if (!failed && options.failAfter !== undefined && output.committed.length > options.failAfter) {
            failed = true;
            throw new Error("a transient failure, after checkpoints past the named one were committed");
          }
          return value;
        })
        .sinkTo(output.sinkFactory(), { uid: "out" });
      return job;
    };
    const first = build({});
    const firstRun = first.execute();
    await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(300), { timeout: 10_000 });
    first.stop();
    const { lastCheckpointId } = await firstRun;
    const second = await build({
      restore: { checkpointId: lastCheckpointId },
      failAfter: output.committed.length + 300,
    }).execute();
    expect(second.restarts).toBe(1);
    // The named checkpoint starts a lineage of its own: its base holds the named state and records it.
    const base = (await storage.list("named")).find((metadata) => metadata.scope === "base");
    expect(base?.summary.base).toMatchObject({
      derivedFrom: [`all#${lastCheckpointId}`],
      startedBy: { checkpointId: lastCheckpointId },
    });
    expect(second.restoredCheckpointId).toBe(base?.checkpointId);
    expect(new Set(output.committed).size).toBe(3_000);
    expect(output.committed).toHaveLength(3_000);
  }, 60_000);
});
