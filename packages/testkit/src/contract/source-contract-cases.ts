import { randomBytes } from "node:crypto";
import { noopMetrics, type SourceSplit, silentLogger } from "@onceflow/core";
import { ContractViolationError, describeFailure } from "./contract-run.js";
import type { SourceContract, SourceContractScope } from "./source-contract-options.js";
import { SourceContractRun } from "./source-contract-run.js";

/**
 * One case of the source contract suite, runnable without a test framework: `run()` resolves when
 * the source kept the rule the case is named after and rejects (usually with a
 * {@link ContractViolationError} naming the reader method) when not.
 *
 * @example
 * ```ts
 * for (const testCase of sourceContractCases(contract)) await testCase.run();
 * ```
 */
export interface SourceContractCase {
  /** Stable id, e.g. `restore-from-every-checkpoint` (use it in `skip`). */
  readonly id: string;
  /** One line on the rule the case checks. */
  readonly title: string;
  /** Set when the contract's `skip` names this case. */
  readonly skipReason: string | undefined;
  run(): Promise<void>;
}

type Run<T, SplitT extends SourceSplit> = SourceContractRun<T, SplitT>;

interface SourceCaseDefinition {
  readonly id: string;
  readonly title: string;
  body<T, SplitT extends SourceSplit>(run: Run<T, SplitT>, recordsPerSplit: number): Promise<void>;
}

/** Reads one more batch, unless every record was handed out already. */
async function readOneBatchIfAny<T, SplitT extends SourceSplit>(run: Run<T, SplitT>): Promise<void> {
  if (!run.allHandedOut()) await run.readOneBatch();
}

/** Reads the rest; a bounded source must then also report that it finished. */
async function readToEnd<T, SplitT extends SourceSplit>(run: Run<T, SplitT>): Promise<void> {
  await run.readEverythingWritten();
  if (run.boundedness === "bounded") {
    await run.readUntil(
      () => run.runningReaders().every((reader) => reader.isFinished()),
      "isFinished() of every reader after the whole bounded input was handed out",
    );
  }
}

/** Settles after a few turns of the event loop: long enough for a resolved promise's callbacks. */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let turn = 0; turn < 10 && !settled; turn++)
    await new Promise<void>((resolve) => setImmediate(resolve));
  return settled;
}

const definitions: SourceCaseDefinition[] = [
  {
    id: "reads-every-record-once",
    title: "one reader reads every split to the end: every record once, in its split's order",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(1);
      await readToEnd(run);
      run.expectEveryRecordOnce("after reading everything");
    },
  },
  {
    id: "restore-after-split-assignment",
    title:
      "a checkpoint taken right after addSplits, before any pollNext, restores to the start positions: every record once",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(2);
      const first = await run.checkpoint();
      await readOneBatchIfAny(run);
      await run.start(2, first);
      await readToEnd(run);
      run.expectEveryRecordOnce(`after restoring checkpoint ${first}`);
    },
  },
  {
    id: "restore-from-every-checkpoint",
    title:
      "a checkpoint after every batch (mid-fetch for a reader that prefetches), each restored in turn: snapshotState gives exactly the handed-out positions, every record once after each restore",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(2);
      const checkpoints = [await run.checkpoint()];
      while (!run.allHandedOut()) {
        await run.readOneBatch();
        checkpoints.push(await run.checkpoint());
      }
      for (const checkpointId of checkpoints) {
        await run.start(2, checkpointId);
        await readToEnd(run);
        run.expectEveryRecordOnce(`after restoring checkpoint ${checkpointId}`);
      }
    },
  },
  {
    id: "restore-same-checkpoint-twice",
    title:
      "the same checkpoint restored twice, with records read in between: positions never go back or skip, every record once",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(1);
      await readOneBatchIfAny(run);
      const checkpointId = await run.checkpoint();
      await readOneBatchIfAny(run);
      await run.start(1, checkpointId);
      await readOneBatchIfAny(run);
      await run.start(1, checkpointId);
      await readToEnd(run);
      run.expectEveryRecordOnce(`after restoring checkpoint ${checkpointId} the second time`);
    },
  },
  {
    id: "rescale-up",
    title: "a checkpoint of 1 reader restored on 3: addSplits of restored splits loses and repeats nothing",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(1);
      await readOneBatchIfAny(run);
      const checkpointId = await run.checkpoint();
      await run.start(3, checkpointId);
      await readToEnd(run);
      run.expectEveryRecordOnce(`after restoring checkpoint ${checkpointId} with parallelism 3`);
    },
  },
  {
    id: "rescale-down",
    title:
      "a checkpoint of 3 readers restored on 2, then on 1: splits moved between readers lose and repeat nothing",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(3);
      await run.pollRound();
      const first = await run.checkpoint();
      await run.start(2, first);
      await readOneBatchIfAny(run);
      const second = await run.checkpoint();
      await run.start(1, second);
      await readToEnd(run);
      run.expectEveryRecordOnce(`after restoring checkpoint ${second} with parallelism 1`);
    },
  },
  {
    id: "commit-back-after-completed-checkpoint",
    title:
      "notifyCheckpointComplete and notifyCheckpointAborted in order, one aborted between completed ones, input written before and while the readers run: a position committed back to the external system is never ahead of a completed checkpoint",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(2);
      await run.checkCommitBack("addSplits and start");
      // A continuous source gets input while it runs too: a change data capture source reads what
      // was there before its start from a snapshot, and commits back only positions of what came after.
      if (run.boundedness === "continuous") await run.writeEverySplit(R);
      await readOneBatchIfAny(run);
      await run.checkCommitBack("pollNext");
      const first = await run.checkpoint();
      await readOneBatchIfAny(run);
      const second = await run.checkpoint();
      await readOneBatchIfAny(run);
      await run.complete(first);
      const third = await run.checkpoint();
      await run.abort(second);
      await readOneBatchIfAny(run);
      await run.complete(third);
      await readToEnd(run);
      await run.checkCommitBack("pollNext");
      const last = await run.checkpoint();
      await run.complete(last);
      // A restart restores the last checkpoint; the restored readers may hear of it again.
      await run.start(2, last);
      await run.complete(last);
      await readToEnd(run);
      run.expectEveryRecordOnce(`after restoring checkpoint ${last}`);
    },
  },
  {
    id: "idle-split-does-not-hold-back-others",
    title:
      "input on one split only, the others idle (empty): pollNext and isAvailable hand out the active split's records without waiting on the idle ones, and an idle split that gets records is read again",
    body: async (run, R) => {
      await run.write(0, R);
      await run.start(1);
      await run.readUntil(() => run.splitHandedOut(0), "split 0's records while the other splits are idle");
      if (run.boundedness === "continuous") {
        const checkpointId = await run.checkpoint();
        await run.write(1, R);
        await run.readUntil(() => run.splitHandedOut(1), "the records written to the idle split 1");
        await run.start(1, checkpointId);
        for (let split = 2; split < run.scope.splits; split++) await run.write(split, R);
      }
      await readToEnd(run);
      run.expectEveryRecordOnce("after the idle splits");
    },
  },
  {
    id: "close-on-every-path",
    title:
      "close() before any split, right after addSplits, in the middle of reading, and while isAvailable waits: it resolves, wakes the waiting isAvailable, and leaves nothing open",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(1);
      await run.closeReaders();
      await run.start(2);
      await readOneBatchIfAny(run);
      await run.closeReaders();
      await run.start(1);
      await readToEnd(run);
      const [reader] = run.runningReaders();
      const waiting = reader!.isAvailable();
      await run.closeReaders();
      if (!(await settledSoon(waiting))) {
        throw run.violation(
          "close",
          "left a pending isAvailable() promise unresolved: resolve every waiter in close(), or the subtask loop never ends",
        );
      }
    },
  },
  {
    id: "bounded-source-ends",
    title:
      "a bounded source: once everything is read, isFinished() is true, isAvailable() resolves and pollNext() hands out nothing; a continuous source never reports finished",
    body: async (run, R) => {
      await run.writeEverySplit(R);
      await run.start(2);
      await readToEnd(run);
      const readers = run.runningReaders();
      if (run.boundedness === "continuous") {
        if (readers.some((reader) => reader.isFinished())) {
          throw run.violation(
            "isFinished",
            "returned true for a continuous source: the job would end; only a bounded source finishes",
          );
        }
      } else {
        for (const reader of readers) {
          if (!(await settledSoon(reader.isAvailable()))) {
            throw run.violation(
              "isAvailable",
              "stays pending after the reader finished: resolve it once isFinished() is true",
            );
          }
          if ((await run.pollRound()) > 0)
            throw run.violation("pollNext", "handed out records after isFinished()");
        }
      }
      run.expectEveryRecordOnce("after reading everything");
    },
  },
];

/**
 * The cases of the source contract, framework-free: each writes input through
 * {@link SourceContract.writeInput}, drives readers of the source as the runtime does — splits
 * assigned, polled between checkpoint barriers, snapshotted, notified, restored (also at another
 * parallelism), closed — and checks every batch on the spot: each record must be the next of its
 * split (positions never go back or skip), and after each restore the records read are the input,
 * each once. A case fails with a {@link ContractViolationError} naming the reader method that broke
 * the rule (`pollNext`, `snapshotState`, `notifyCheckpointComplete`, `close`, …).
 *
 * A "restore" is a failover: the running readers are closed (as the runtime cancels its tasks), a
 * new source instance is created, and new readers get the checkpoint's splits, serialized and
 * deserialized with the source's `splitSerializer`. Without `assignSplit`, split `i` of the list
 * goes to subtask `i % parallelism`.
 *
 * @example
 * ```ts
 * const cases = sourceContractCases({ name: "MySource", createSource, writeInput, createRecord: String });
 * await cases.find((each) => each.id === "rescale-up")?.run();
 * ```
 */
export function sourceContractCases<T, SplitT extends SourceSplit = SourceSplit>(
  contract: SourceContract<T, SplitT>,
): SourceContractCase[] {
  const splits = contract.splits ?? 4;
  if (!(Number.isInteger(splits) && splits >= 3)) {
    throw new RangeError(
      `splits must be a whole number of at least 3 (the rescale cases need 3), got ${splits}`,
    );
  }
  const recordsPerSplit = contract.recordsPerSplit ?? 6;
  if (!(Number.isInteger(recordsPerSplit) && recordsPerSplit >= 2)) {
    throw new RangeError(`recordsPerSplit must be a whole number of at least 2, got ${recordsPerSplit}`);
  }
  const cases: SourceContractCase[] = definitions.map((definition) => ({
    id: definition.id,
    title: definition.title,
    skipReason: contract.skip?.[definition.id],
    run: () => withRun(contract, definition.id, splits, (run) => definition.body(run, recordsPerSplit)),
  }));
  cases.splice(
    cases.findIndex((each) => each.id === "close-on-every-path"),
    0,
    {
      id: "close-before-splits",
      title:
        "a reader created and closed without ever getting a split: close() resolves and leaves nothing open",
      skipReason: contract.skip?.["close-before-splits"],
      run: () =>
        withRun(contract, "close-before-splits", splits, (run) => closeBeforeSplits(contract, run.scope)),
    },
  );
  return cases;
}

async function closeBeforeSplits<T, SplitT extends SourceSplit>(
  contract: SourceContract<T, SplitT>,
  scope: SourceContractScope,
): Promise<void> {
  const source = await contract.createSource(scope);
  const reader = await source.createReader({
    jobId: `contract-${scope.id}`,
    operatorUid: "source",
    subtaskIndex: 0,
    parallelism: 1,
    isRestored: false,
    checkpointingInterval: 1000,
    logger: silentLogger,
    metrics: noopMetrics,
  });
  await reader.close();
}

async function withRun<T, SplitT extends SourceSplit>(
  contract: SourceContract<T, SplitT>,
  caseId: string,
  splits: number,
  body: (run: SourceContractRun<T, SplitT>) => Promise<void>,
): Promise<void> {
  const scope: SourceContractScope = { id: newScopeId(contract.name, caseId), caseId, splits };
  await contract.setup?.(scope);
  try {
    const run = new SourceContractRun(contract, scope);
    try {
      await body(run);
      await run.closeReaders();
    } catch (error) {
      await run.closeEverything();
      throw asCaseFailure(contract.name, caseId, error);
    }
    await expectNothingLingering(contract, scope);
  } finally {
    await contract.teardown?.(scope);
  }
}

function asCaseFailure(name: string, caseId: string, error: unknown): ContractViolationError {
  if (error instanceof ContractViolationError) return error;
  return new ContractViolationError(`${name}: ${caseId}: ${describeFailure(error)}`, { caseId }, error);
}

async function expectNothingLingering<T, SplitT extends SourceSplit>(
  contract: SourceContract<T, SplitT>,
  scope: SourceContractScope,
): Promise<void> {
  if (contract.lingering === undefined) return;
  const left = [...(await contract.lingering(scope))];
  if (left.length === 0) return;
  throw new ContractViolationError(
    `${contract.name}: ${scope.caseId}: close left resources open after every reader was closed: ${left.join(", ")} — release every connection, consumer, file handle and timer in close(), also when no split was ever added`,
    { caseId: scope.caseId, method: "close", lingering: left },
  );
}

function newScopeId(contractName: string, caseId: string): string {
  const name =
    contractName
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "")
      .slice(0, 12) || "source";
  const casePart = caseId
    .split("-")
    .map((word) => word[0] ?? "")
    .join("");
  return `s${name}_${casePart}_${randomBytes(4).toString("hex")}`;
}
