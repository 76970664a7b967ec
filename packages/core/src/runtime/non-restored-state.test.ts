import { deserialize } from "node:v8";
import { describe, expect, it, vi } from "vitest";
import { createCompletedCheckpoint } from "../checkpoint/completed-checkpoint.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { isOnceflowError, NonRestoredStateError } from "../errors/onceflow-error.js";
import { createMemoryLogger, type Logger } from "../observability/logger.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job, type JobOptions } from "./job.js";
import type { SubtaskSnapshot } from "./subtask.js";
import { type Counted, type Reading, RunningCount } from "./testing/running-count.js";

// State is matched to operators by uid on restore: a checkpoint whose state some operator of the
// new job does not claim (a renamed uid) is refused, unless dropping it is allowed — in one
// process, one process per subtask, and on a rescale.

const RECORDS = 3_000;
const KEYS = 6;
const UIDS = { source: "readings", count: "count", sink: "out" };

interface Shape {
  readonly parallelism: number;
  readonly subtaskIndex?: number;
  readonly uids?: Partial<typeof UIDS>;
  readonly allowNonRestoredState?: boolean;
  readonly logger?: Logger;
  /** Without `keyBy` (a stateless `map` where the count was): a job each process can run alone. */
  readonly unkeyed?: boolean;
}

function buildJob(storage: MemoryCheckpointStorage, output: CollectedOutput<Counted>, shape: Shape): Job {
  const uids = { ...UIDS, ...shape.uids };
  const options: JobOptions = {
    jobId: "claims",
    parallelism: shape.parallelism,
    ...(shape.subtaskIndex === undefined ? {} : { subtaskIndex: shape.subtaskIndex }),
    ...(shape.allowNonRestoredState === undefined
      ? {}
      : { allowNonRestoredState: shape.allowNonRestoredState }),
    ...(shape.logger === undefined ? {} : { logger: shape.logger }),
    checkpointing: { interval: 50, storage },
    // A refusal is final: a restart could only refuse again.
    restartStrategy: { type: "fixed-delay", attempts: 3, delay: 10 },
  };
  const job = new Job(options);
  const readings = job.fromSource(
    new GeneratorSource<Reading>({
      count: RECORDS,
      splits: 6,
      generate: (index) => ({ index, key: `key-${index % KEYS}` }),
      recordsPerSecond: 6_000,
    }),
    { uid: uids.source },
  );
  const counted = shape.unkeyed
    ? readings.map((reading): Counted => ({ ...reading, count: 0 }), { uid: uids.count })
    : readings.keyBy((reading) => reading.key).process(() => new RunningCount(), { uid: uids.count });
  counted.sinkTo(output.sinkFactory(), { uid: uids.sink });
  return job;
}

/** Runs the job until a checkpoint committed output, then stops it: the checkpoint holds every kind of state. */
async function runAndStop(
  storage: MemoryCheckpointStorage,
  output: CollectedOutput<Counted>,
  shapes: Shape[],
) {
  const jobs = shapes.map((shape) => buildJob(storage, output, shape));
  const runs = jobs.map((job) => job.execute());
  await vi.waitFor(() => expect(output.committed.length).toBeGreaterThan(0), { timeout: 10_000 });
  for (const job of jobs) job.stop();
  const results = await Promise.all(runs);
  expect(output.committed.length).toBeLessThan(RECORDS);
  return results;
}

async function refusal(run: Promise<unknown>): Promise<NonRestoredStateError> {
  const error = await run.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(isOnceflowError(error) && error.code).toBe("NON_RESTORED_STATE");
  return error as NonRestoredStateError;
}

function expectExactlyOnce(committed: readonly Counted[]): void {
  const indexes = committed.map((record) => record.index).sort((a, b) => a - b);
  expect(indexes).toEqual(Array.from({ length: RECORDS }, (_, index) => index));
}

/** Per key, counts 1..n without gaps or repeats: the keyed state came through. */
function expectContinuousCounts(committed: readonly Counted[]): void {
  const countsByKey = new Map<string, number[]>();
  for (const record of committed)
    countsByKey.set(record.key, [...(countsByKey.get(record.key) ?? []), record.count]);
  for (const [key, counts] of countsByKey) {
    expect(
      [...counts].sort((a, b) => a - b),
      key,
    ).toEqual(Array.from({ length: RECORDS / KEYS }, (_, index) => index + 1));
  }
}

const warningsOf = (logger: ReturnType<typeof createMemoryLogger>): string[] =>
  logger.entries.filter((entry) => entry.level === "warn").map((entry) => entry.message);

describe("restoring state that no operator claims", () => {
  it("refuses a renamed keyed operator, and with allowNonRestoredState drops its state with a warning", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    const [first] = await runAndStop(storage, output, [{ parallelism: 1 }]);
    const committedBefore = output.committed.length;

    const refused = await refusal(
      buildJob(storage, output, { parallelism: 1, uids: { count: "count-v2" } }).execute(),
    );
    expect(refused).toBeInstanceOf(NonRestoredStateError);
    expect(refused.checkpointId).toBe(first?.lastCheckpointId);
    expect(refused.operators).toMatchObject([{ uid: "count", kinds: ["keyed state"], subtasks: [0] }]);
    expect(refused.message).toContain("operator 'count' (keyed state");
    expect(refused.message).toContain("the job's operators are 'readings', 'count-v2', 'out'");
    expect(output.committed).toHaveLength(committedBefore);

    const logger = createMemoryLogger();
    const allowed = await buildJob(storage, output, {
      parallelism: 1,
      uids: { count: "count-v2" },
      allowNonRestoredState: true,
      logger,
    }).execute();
    expect(allowed).toMatchObject({
      endedBy: "end-of-input",
      restoredCheckpointId: first?.lastCheckpointId,
      restarts: 0,
    });
    expect(warningsOf(logger)).toEqual([
      expect.stringContaining(
        `dropping state of checkpoint ${first?.lastCheckpointId} that no operator of the job claims: operator 'count' (keyed state`,
      ),
    ]);
    // Delivery stays exactly once; the counts start again at 1: the old counts were dropped.
    expectExactlyOnce(output.committed);
    const afterRestore = output.committed.slice(committedBefore);
    expect(Math.min(...afterRestore.map((record) => record.count))).toBe(1);
  });

  it("refuses a renamed sink and source, naming their transactions and positions; allowed, it says the transactions are not committed", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    await runAndStop(storage, output, [{ parallelism: 2 }]);
    const renamed = { source: "readings-v2", sink: "out-v2" };

    const refused = await refusal(buildJob(storage, output, { parallelism: 2, uids: renamed }).execute());
    expect(refused.operators.map(({ uid, kinds, subtasks }) => ({ uid, kinds, subtasks }))).toEqual([
      { uid: "out", kinds: ["sink transactions"], subtasks: [0, 1] },
      { uid: "readings", kinds: ["source positions"], subtasks: [0, 1] },
    ]);
    // Every checkpoint of a two-phase-commit sink holds the transaction pre-committed under it.
    const [sink] = refused.operators;
    expect(sink?.pendingTransactions.map((pending) => pending.checkpointId)).toContain(refused.checkpointId);
    expect(refused.message).toContain("a dropped sink's pending transactions are not committed by this job");

    const logger = createMemoryLogger();
    await buildJob(storage, output, {
      parallelism: 2,
      uids: renamed,
      allowNonRestoredState: true,
      logger,
    }).execute();
    const [warning] = warningsOf(logger);
    expect(warning).toContain("operator 'out' (sink transactions:");
    expect(warning).toContain("operator 'readings' (source positions");
    expect(warning).toContain("its pending ones are not committed by this job");
  });

  it("refuses in every process of a one-process-per-subtask deployment", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    const perProcess = (subtaskIndex: number): Shape => ({ parallelism: 2, subtaskIndex, unkeyed: true });
    await runAndStop(storage, output, [perProcess(0), perProcess(1)]);
    const renamed = { sink: "out-v2" };
    for (const subtaskIndex of [0, 1]) {
      const refused = await refusal(
        buildJob(storage, output, { ...perProcess(subtaskIndex), uids: renamed }).execute(),
      );
      expect(refused.operators).toMatchObject([
        { uid: "out", kinds: ["sink transactions"], subtasks: [subtaskIndex] },
      ]);
    }
    const loggers = [createMemoryLogger(), createMemoryLogger()];
    await Promise.all(
      [0, 1].map((subtaskIndex) =>
        buildJob(storage, output, {
          ...perProcess(subtaskIndex),
          uids: renamed,
          allowNonRestoredState: true,
          logger: loggers[subtaskIndex]!,
        }).execute(),
      ),
    );
    for (const logger of loggers) {
      expect(warningsOf(logger)).toEqual([expect.stringContaining("operator 'out' (sink transactions:")]);
    }
    // The source positions were restored and the stopped run had committed its transactions.
    expectExactlyOnce(output.committed);
  });

  it("refuses on a rescale without losing the state, which the original uid then restores", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    await runAndStop(storage, output, [{ parallelism: 2 }]);

    const refused = await refusal(
      buildJob(storage, output, { parallelism: 3, uids: { count: "count-v2" } }).execute(),
    );
    expect(refused.operators).toMatchObject([{ uid: "count", kinds: ["keyed state"] }]);
    // The rescale's base checkpoint still carries the state under its uid: nothing was dropped.
    const restored = await buildJob(storage, output, { parallelism: 3 }).execute();
    expect(restored.endedBy).toBe("end-of-input");
    expectExactlyOnce(output.committed);
    expectContinuousCounts(output.committed);
  });

  it("refuses a rescale before fencing anything: the old deployment keeps running", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    await runAndStop(storage, output, [
      { parallelism: 2, subtaskIndex: 0, unkeyed: true },
      { parallelism: 2, subtaskIndex: 1, unkeyed: true },
    ]);
    // A process of the old parallelism is still alive: it claimed its scope before the redeploy.
    const alive = await storage.claimIncarnation("claims", "subtask-1-of-2");
    const newest = Math.max(...(await storage.list("claims")).map((metadata) => metadata.checkpointId));

    await refusal(buildJob(storage, output, { parallelism: 3, uids: { sink: "out-v2" } }).execute());
    // It can still store (and so commit): the refused start fenced nothing.
    const next = createCompletedCheckpoint({
      jobId: "claims",
      checkpointId: newest + 1,
      scope: "subtask-1-of-2",
      parallelism: 2,
      subtaskStates: new Map([[1, Buffer.from("state")]]),
      incarnation: alive,
    });
    await expect(storage.store(next)).resolves.toBeUndefined();
  });

  it("refuses a renamed source on a rescale so that its splits still go where the source assigns them", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    await runAndStop(storage, output, [{ parallelism: 2 }]);

    const refused = await refusal(
      buildJob(storage, output, { parallelism: 3, uids: { source: "readings-v2" } }).execute(),
    );
    expect(refused.operators).toMatchObject([
      { uid: "readings", kinds: ["source positions"], subtasks: [0, 1, 2] },
    ]);
    // Nothing of the refused start is stored: the lineage is made again once the uid is back.
    expect((await storage.list("claims")).some((metadata) => metadata.scope === "base")).toBe(false);
    await buildJob(storage, output, { parallelism: 3 }).execute();
    expectExactlyOnce(output.committed);
    expectContinuousCounts(output.committed);
  });

  it("drops state on a rescale when allowed, with a warning", async () => {
    const storage = new MemoryCheckpointStorage();
    const output = new CollectedOutput<Counted>();
    await runAndStop(storage, output, [{ parallelism: 2 }]);
    const logger = createMemoryLogger();
    const result = await buildJob(storage, output, {
      parallelism: 1,
      uids: { count: "count-v2" },
      allowNonRestoredState: true,
      logger,
    }).execute();
    expect(result.endedBy).toBe("end-of-input");
    expect(warningsOf(logger)).toEqual([
      expect.stringContaining("operator 'count' (keyed state; subtask 0)"),
    ]);
    expectExactlyOnce(output.committed);
    // Dropped once for the new parallelism: its base checkpoint holds no state under the old uid.
    const base = (await storage.list("claims")).find((metadata) => metadata.scope === "base");
    const stored = await storage.load("claims", "base", base!.checkpointId);
    for (const bytes of stored.subtaskStates.values()) {
      expect(Object.keys((deserialize(bytes) as SubtaskSnapshot).operators).sort()).toEqual([
        "out",
        "readings",
      ]);
    }
  });

  it("refuses an allowNonRestoredState that is not a boolean", () => {
    expect(() => new Job({ jobId: "claims", allowNonRestoredState: "yes" as unknown as boolean })).toThrow(
      "allowNonRestoredState: must be true or false",
    );
  });
});
