import { afterEach, describe, expect, it, vi } from "vitest";
import type { FunctionSnapshotContext } from "../api/checkpointed-function.js";
import { ConfigurationError, RecoveryError, TransactionError } from "../errors/onceflow-error.js";
import { MetricNames } from "../observability/metrics.js";
import { redistributeOperatorState } from "../state/operator-state-store.js";
import type { SinkContext } from "./sink.js";
import { type RecordedTransaction, RecordingSink, SinkJournal } from "./testing/recording-sink.js";
import { type HarnessCheckpoint, SinkTestHarness } from "./testing/sink-test-harness.js";
import type { TwoPhaseCommitSinkOptions } from "./two-phase-commit-options.js";
import { TwoPhaseCommitSink } from "./two-phase-commit-sink.js";

const fastRetry = { initialDelay: 1, maxDelay: 4 };

function setUp(
  options: TwoPhaseCommitSinkOptions<RecordedTransaction> = {},
  journal = new SinkJournal(),
  harnessOptions: { subtaskIndex?: number; parallelism?: number } = {},
) {
  const sink = new RecordingSink(journal, { commitRetry: fastRetry, ...options });
  const harness = new SinkTestHarness(sink, harnessOptions);
  return { journal, sink, harness };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("TwoPhaseCommitSink protocol", () => {
  it("begins a transaction on a fresh start and writes records into it", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("a", "b");
    expect(journal.calls).toEqual([
      "finishRecovering after 0",
      "begin t1 after 0",
      "invoke t1 a",
      "invoke t1 b",
    ]);
    expect(sink.currentTransaction()).toEqual({ id: "t1", values: ["a", "b"] });
  });

  it("pre-commits at the barrier, begins the next transaction, and commits on completion", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    expect(journal.calls.slice(-2)).toEqual(["preCommit t1 at 1", "begin t2 after 1"]);
    expect(sink.pendingCheckpointIds()).toEqual([1]);
    expect(journal.committed).toEqual([]);
    await harness.notifyComplete(1);
    expect(journal.committed).toEqual(["a"]);
    expect(sink.pendingCheckpointIds()).toEqual([]);
  });

  it("commits several pending checkpoints in ascending order", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    for (const id of [1, 2, 3]) {
      await harness.write(`v${id}`);
      await harness.snapshot(id);
    }
    expect(sink.pendingCheckpointIds()).toEqual([1, 2, 3]);
    await harness.notifyComplete(1);
    expect(journal.callsOf("commit")).toEqual(["commit t1"]);
    await harness.notifyComplete(3);
    expect(journal.callsOf("commit")).toEqual(["commit t1", "commit t2", "commit t3"]);
    expect(journal.committed).toEqual(["v1", "v2", "v3"]);
  });

  it("commits everything a higher checkpoint subsumes when a notification was skipped", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("x");
    await harness.snapshot(4);
    await harness.write("y");
    await harness.snapshot(5);
    await harness.write("z");
    await harness.snapshot(6);
    // The notification of 4 never comes; 5 subsumes it, 6 stays pending.
    await harness.notifyComplete(5);
    expect(journal.callsOf("commit")).toEqual(["commit t1", "commit t2"]);
    expect(sink.pendingCheckpointIds()).toEqual([6]);
  });

  it("ignores notifications of unknown and older checkpoints, with a debug line", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.notifyComplete(9); // nothing pending at all
    await harness.snapshot(3);
    await harness.notifyComplete(2); // older than everything pending
    expect(journal.callsOf("commit")).toEqual([]);
    expect(sink.pendingCheckpointIds()).toEqual([3]);
    await harness.notifyComplete(3);
    await harness.notifyComplete(3); // already committed
    await harness.notifyComplete(1);
    expect(journal.callsOf("commit")).toEqual(["commit t1"]);
    const debug = harness.logger.entries.filter((entry) => entry.message.includes("nothing to commit"));
    expect(debug.map((entry) => entry.fields.checkpointId)).toEqual([9, 2, 3, 1]);
    expect(debug.every((entry) => entry.level === "debug")).toBe(true);
  });

  it("keeps pending transactions when a checkpoint is aborted and commits them with a later one", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await harness.notifyAborted(1);
    expect(sink.pendingCheckpointIds()).toEqual([1]);
    await harness.write("b");
    await harness.snapshot(2);
    await harness.notifyComplete(2);
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("sends empty transactions through the same path", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    await harness.checkpoint(1);
    await harness.checkpoint(2);
    expect(journal.callsOf("preCommit", "commit")).toEqual([
      "preCommit t1 at 1",
      "commit t1",
      "preCommit t2 at 2",
      "commit t2",
    ]);
    expect(journal.committed).toEqual([]);
  });

  it("aborts the open transaction on close and leaves pending ones alone", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await harness.write("b");
    await harness.close();
    expect(journal.callsOf("abort", "commit")).toEqual(["abort t2"]);
    expect(sink.currentTransaction()).toBeUndefined();
    expect(sink.pendingCheckpointIds()).toEqual([1]);
    await harness.close();
    expect(journal.callsOf("abort")).toEqual(["abort t2"]);
  });

  it("logs and swallows an abort error on close so it cannot mask the original failure", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    journal.abortFails = true;
    await expect(harness.close()).resolves.toBeUndefined();
    const logged = harness.logger.entries.find((entry) => entry.level === "error");
    expect(logged?.message).toMatch(/abort/);
    expect(logged?.fields.transaction).toBe("t1");
  });

  it("finishes without touching transactions; the final checkpoint commits the last one", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    await harness.write("last");
    await harness.finishAndClose(1);
    expect(journal.committed).toEqual(["last"]);
    expect(journal.callsOf("preCommit", "commit", "abort")).toEqual([
      "preCommit t1 at 1",
      "commit t1",
      "abort t2",
    ]);
  });
});

describe("TwoPhaseCommitSink recovery", () => {
  async function crashAfterCheckpoint(journal: SinkJournal): Promise<HarnessCheckpoint> {
    const { harness } = setUp({}, journal);
    await harness.initialize();
    await harness.write("a");
    const checkpoint1 = await harness.snapshot(1);
    await harness.notifyComplete(1);
    await harness.write("b");
    const checkpoint2 = await harness.snapshot(2);
    await harness.write("c"); // in the open transaction t3
    // SIGKILL: neither the notification of 2 nor close ever happen.
    expect(checkpoint1.checkpointId).toBe(1);
    return checkpoint2;
  }

  it("recovers and commits the pending transaction, then aborts the open one, then begins a new one", async () => {
    const journal = new SinkJournal();
    const checkpoint = await crashAfterCheckpoint(journal);
    const before = journal.calls.length;
    const { sink, harness } = setUp({}, journal);
    await harness.initialize(checkpoint);
    expect(journal.calls.slice(before)).toEqual([
      "recoverAndCommit t2",
      "recoverAndAbort t3",
      "finishRecovering after 2",
      "begin t4 after 2",
    ]);
    expect(journal.committed).toEqual(["a", "b"]);
    expect(sink.pendingCheckpointIds()).toEqual([]);
  });

  it("commits a restored pending transaction only once even when it was committed before the crash", async () => {
    const journal = new SinkJournal();
    const { harness } = setUp({}, journal);
    await harness.initialize();
    await harness.write("a");
    const checkpoint = await harness.snapshot(1);
    await harness.notifyComplete(1); // committed, then the process dies
    await setUp({}, journal).harness.initialize(checkpoint);
    expect(journal.callsOf("commit", "recoverAndCommit")).toEqual(["commit t1", "recoverAndCommit t1"]);
    expect(journal.committed).toEqual(["a"]);
  });

  it("recovers several pending transactions in ascending checkpoint order", async () => {
    const journal = new SinkJournal();
    const { harness } = setUp({}, journal);
    await harness.initialize();
    await harness.snapshot(1);
    await harness.snapshot(2);
    const checkpoint = await harness.snapshot(3);
    await setUp({}, journal).harness.initialize(checkpoint);
    expect(journal.callsOf("recoverAndCommit", "recoverAndAbort")).toEqual([
      "recoverAndCommit t1",
      "recoverAndCommit t2",
      "recoverAndCommit t3",
      "recoverAndAbort t4",
    ]);
  });

  it("does not drop a restored transaction whose recovery fails: restoring again commits it", async () => {
    const journal = new SinkJournal();
    const checkpoint = await crashAfterCheckpoint(journal);
    journal.failCommit("t2", Number.POSITIVE_INFINITY);
    const failing = setUp({ commitRetry: { ...fastRetry, maxAttempts: 2 } }, journal);
    await expect(failing.harness.initialize(checkpoint)).rejects.toMatchObject({
      code: "COMMIT_FAILED",
      checkpointId: 2,
    });
    expect(failing.sink.pendingCheckpointIds()).toEqual([2]);
    // t1..t3 were the crashed instance's; the failed recovery began none.
    expect(journal.callsOf("begin")).toEqual(["begin t1 after 0", "begin t2 after 1", "begin t3 after 2"]);
    journal.failCommit("t2", 0);
    await setUp({}, journal).harness.initialize(checkpoint);
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("reports a handle the serializer cannot read as a RecoveryError", async () => {
    const journal = new SinkJournal();
    const checkpoint = await crashAfterCheckpoint(journal);
    const broken = {
      serialize: (value: RecordedTransaction) => Buffer.from(JSON.stringify(value)),
      deserialize: (): RecordedTransaction => {
        throw new Error("unreadable");
      },
    };
    await expect(
      setUp({ transactionSerializer: broken }, journal).harness.initialize(checkpoint),
    ).rejects.toThrow(RecoveryError);
  });

  it("stores transactions with the given serializer", async () => {
    const journal = new SinkJournal();
    const serializer = {
      serialize: (value: RecordedTransaction) => Buffer.from(`json:${JSON.stringify(value)}`),
      deserialize: (bytes: Buffer) => JSON.parse(bytes.toString().slice(5)) as RecordedTransaction,
    };
    const { harness } = setUp({ transactionSerializer: serializer }, journal);
    await harness.initialize();
    await harness.write("a");
    const checkpoint = await harness.snapshot(1);
    const stored = checkpoint.state["pending-transactions"]?.elements ?? [];
    expect(stored).toHaveLength(2); // the pending t1 and the open t2
    await setUp({ transactionSerializer: serializer }, journal).harness.initialize(checkpoint);
    expect(journal.committed).toEqual(["a"]);
  });

  it("wraps a failing recoverAndAbort in a RecoveryError naming the transaction", async () => {
    const journal = new SinkJournal();
    const checkpoint = await crashAfterCheckpoint(journal);
    class FailingAbort extends RecordingSink {
      protected override recoverAndAbort(transaction: RecordedTransaction): void {
        throw new Error(`cannot reach ${transaction.id}`);
      }
    }
    const harness = new SinkTestHarness(new FailingAbort(journal));
    await expect(harness.initialize(checkpoint)).rejects.toThrow(/t3.*checkpoint 2.*cannot reach t3/);
  });

  it("forgets everything of a failed attempt when the same instance is initialized again", async () => {
    const journal = new SinkJournal();
    const { sink, harness } = setUp({}, journal);
    await harness.initialize();
    await harness.write("from-failed-attempt");
    await harness.snapshot(1); // checkpoint 1 fails to store; the attempt fails
    await harness.close();
    // No checkpoint completed: the next attempt starts fresh with the same instance.
    const retry = new SinkTestHarness(sink);
    await retry.initialize();
    expect(sink.pendingCheckpointIds()).toEqual([]);
    await retry.write("replayed");
    await retry.checkpoint(1);
    expect(journal.committed).toEqual(["replayed"]);
    await retry.close();
    expect(journal.callsOf("abort")).toEqual(["abort t2", "abort t4"]);
  });

  it("requires initializeState before open", () => {
    const sink = new RecordingSink(new SinkJournal());
    const context = new SinkTestHarness(sink);
    expect(() =>
      sink.open({
        jobId: "j",
        operatorUid: "s",
        checkpointingInterval: undefined,
        subtaskIndex: 0,
        parallelism: 1,
        attemptNumber: 0,
        incarnation: 1,
        logger: context.logger,
        metrics: context.metrics,
      }),
    ).toThrow(ConfigurationError);
  });
});

describe("TwoPhaseCommitSink commit failures", () => {
  it("retries a commit that fails twice, with backoff, and counts the retries", async () => {
    const { journal, sink, harness } = setUp({
      commitRetry: { initialDelay: 1, maxDelay: 2, multiplier: 2 },
    });
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    journal.failCommit("t1", 2);
    await harness.notifyComplete(1);
    expect(journal.callsOf("commit")).toEqual(["commit t1", "commit t1", "commit t1"]);
    expect(journal.committed).toEqual(["a"]);
    expect(sink.pendingCheckpointIds()).toEqual([]);
    expect(harness.metrics.read(MetricNames.commitRetries)).toBe(2);
    const retries = harness.logger.entries.filter((entry) => entry.message.includes("retrying"));
    expect(retries.map((entry) => entry.fields.retryInMs)).toEqual([1, 2]);
  });

  it("grows the backoff up to maxDelay", async () => {
    const { journal, harness } = setUp({
      commitRetry: { maxAttempts: 6, initialDelay: 1, maxDelay: 5, multiplier: 3 },
    });
    await harness.initialize();
    await harness.snapshot(1);
    journal.failCommit("t1", 5);
    await harness.notifyComplete(1);
    const retries = harness.logger.entries.filter((entry) => entry.message.includes("retrying"));
    expect(retries.map((entry) => entry.fields.retryInMs)).toEqual([1, 3, 5, 5, 5]);
  });

  it("fails with COMMIT_FAILED when retries run out, keeps the transaction pending, and a restore commits it", async () => {
    const { journal, sink, harness } = setUp({ commitRetry: { ...fastRetry, maxAttempts: 3 } });
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await harness.write("b");
    await harness.snapshot(2);
    journal.failCommit("t1", Number.POSITIVE_INFINITY);
    const failure = await harness.notifyComplete(2).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionError);
    expect(failure).toMatchObject({ code: "COMMIT_FAILED", checkpointId: 1, transactionId: "t1" });
    expect((failure as Error).message).toMatch(/t1 of checkpoint 1 failed 3 time/);
    expect((failure as Error).cause).toBeInstanceOf(Error);
    expect(journal.callsOf("commit")).toEqual(["commit t1", "commit t1", "commit t1"]);
    // Neither t1 nor the later t2 is dropped, and the next checkpoint still carries both.
    expect(sink.pendingCheckpointIds()).toEqual([1, 2]);
    const checkpoint = await harness.snapshot(3);
    journal.failCommit("t1", 0);
    const before = journal.calls.length;
    await setUp({}, journal).harness.initialize(checkpoint);
    expect(journal.calls.slice(before, before + 3)).toEqual([
      "recoverAndCommit t1",
      "recoverAndCommit t2",
      "recoverAndCommit t3",
    ]);
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("fails at once on a fatal error, without retrying", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.snapshot(1);
    journal.failCommit("t1", 1);
    journal.classification = "fatal";
    await expect(harness.notifyComplete(1)).rejects.toMatchObject({ code: "COMMIT_FAILED", checkpointId: 1 });
    expect(journal.callsOf("commit")).toEqual(["commit t1"]);
    expect(sink.pendingCheckpointIds()).toEqual([1]);
  });

  it("fails with TRANSACTION_FENCED on a fenced commit", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.snapshot(1);
    journal.failCommit("t1", 1);
    journal.classification = "fenced";
    const failure = await harness.notifyComplete(1).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: "TRANSACTION_FENCED", checkpointId: 1, transactionId: "t1" });
    expect((failure as Error).message).toContain("this one is a zombie and must stop");
    expect(journal.callsOf("commit")).toEqual(["commit t1"]);
    expect(sink.pendingCheckpointIds()).toEqual([1]);
  });

  it("says a fenced commit during recovery comes from an older checkpoint or another instance, not a zombie", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    const checkpoint = await harness.snapshot(1);
    journal.failCommit("t1", 1);
    journal.classification = "fenced";
    const restarted = new SinkTestHarness(new RecordingSink(journal, { commitRetry: fastRetry }));
    const failure = await restarted.initialize(checkpoint).catch((error: unknown) => error);
    const fenced = failure instanceof RecoveryError ? failure.cause : failure;
    expect(fenced).toMatchObject({ code: "TRANSACTION_FENCED", checkpointId: 1 });
    expect((fenced as Error).message).toContain("a checkpoint older than the job's latest was restored");
  });

  describe("timed out by the external system", () => {
    async function timedOutCommit(options: TwoPhaseCommitSinkOptions<RecordedTransaction>, ageMs: number) {
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(1_000_000);
      const context = setUp(options);
      await context.harness.initialize();
      await context.harness.write("lost");
      await context.harness.snapshot(7);
      vi.setSystemTime(1_000_000 + ageMs);
      context.journal.failCommit("t1", 1);
      context.journal.classification = "timed-out";
      const failure = await context.harness.notifyComplete(7).then(
        () => undefined,
        (error: unknown) => error,
      );
      return { ...context, failure };
    }

    it("is a TRANSACTION_TIMED_OUT error saying the checkpoint's data is lost", async () => {
      const { failure, sink } = await timedOutCommit({ transactionTimeout: 1000 }, 5000);
      expect(failure).toBeInstanceOf(TransactionError);
      expect(failure).toMatchObject({ code: "TRANSACTION_TIMED_OUT", checkpointId: 7 });
      expect((failure as Error).message).toMatch(/data of checkpoint 7 is lost/);
      expect(sink.pendingCheckpointIds()).toEqual([7]);
    });

    it("is an error even with the opt-in when the transaction is younger than the timeout", async () => {
      const { failure } = await timedOutCommit(
        { transactionTimeout: 10_000, ignoreFailuresAfterTransactionTimeout: true },
        5000,
      );
      expect(failure).toMatchObject({ code: "TRANSACTION_TIMED_OUT" });
    });

    it("is logged as data loss and dropped only with the opt-in and an old transaction", async () => {
      const { failure, sink, harness, journal } = await timedOutCommit(
        { transactionTimeout: 1000, ignoreFailuresAfterTransactionTimeout: true },
        5000,
      );
      expect(failure).toBeUndefined();
      expect(sink.pendingCheckpointIds()).toEqual([]);
      expect(journal.committed).toEqual([]);
      const loss = harness.logger.entries.find((entry) => entry.message.startsWith("DATA LOST"));
      expect(loss?.level).toBe("error");
      expect(loss?.fields).toMatchObject({ checkpointId: 7, transaction: "t1" });
      expect(loss?.message).toMatch(/checkpoint 7/);
    });
  });
});

describe("TwoPhaseCommitSink transaction timeout warnings", () => {
  async function warningsAfter(ageMs: number, options: TwoPhaseCommitSinkOptions<RecordedTransaction>) {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(2_000_000);
    const { harness } = setUp(options);
    await harness.initialize();
    vi.setSystemTime(2_000_000 + ageMs);
    await harness.snapshot(3);
    await harness.notifyComplete(3);
    return harness.logger.entries.filter((entry) => entry.level === "warn");
  }

  it("warns at pre-commit and commit when a transaction is older than ratio × timeout", async () => {
    const warnings = await warningsAfter(850, { transactionTimeout: 1000 });
    expect(warnings.map((entry) => entry.fields.phase)).toEqual(["pre-commit", "commit"]);
    expect(warnings[0]?.fields).toMatchObject({
      checkpointId: 3,
      transaction: "t1",
      ageMs: 850,
      transactionTimeoutMs: 1000,
    });
  });

  it("does not warn about a young transaction", async () => {
    expect(await warningsAfter(700, { transactionTimeout: 1000 })).toEqual([]);
  });

  it("follows transactionTimeoutWarningRatio", async () => {
    expect(
      await warningsAfter(600, { transactionTimeout: 1000, transactionTimeoutWarningRatio: 0.5 }),
    ).toHaveLength(2);
  });

  it("does not warn without a transactionTimeout", async () => {
    expect(await warningsAfter(10_000_000, {})).toEqual([]);
  });
});

describe("TwoPhaseCommitSink rescale", () => {
  /** Two subtasks, each with two pending transactions (no notification arrived) and an open one. */
  async function twoSubtasksAtCheckpoint2(journal: SinkJournal): Promise<HarnessCheckpoint[]> {
    const checkpoints: HarnessCheckpoint[] = [];
    for (const subtaskIndex of [0, 1]) {
      const { harness } = setUp({}, journal, { subtaskIndex, parallelism: 2 });
      await harness.initialize();
      await harness.write(`s${subtaskIndex}-1`);
      await harness.snapshot(1);
      await harness.write(`s${subtaskIndex}-2`);
      checkpoints.push(await harness.snapshot(2));
      await harness.write(`s${subtaskIndex}-open`);
    }
    return checkpoints;
  }

  for (const newParallelism of [3, 1]) {
    it(`recovers every pending transaction exactly once on 2 → ${newParallelism} subtasks`, async () => {
      const journal = new SinkJournal();
      const old = await twoSubtasksAtCheckpoint2(journal);
      // t1, t2, t3 were subtask 0's (t3 open); t4, t5, t6 subtask 1's (t6 open).
      const states = redistributeOperatorState(
        old.map((checkpoint) => checkpoint.state),
        newParallelism,
      );
      const before = journal.calls.length;
      for (const [subtaskIndex, state] of states.entries()) {
        await setUp({}, journal, { subtaskIndex, parallelism: newParallelism }).harness.initialize({
          checkpointId: 2,
          state,
        });
      }
      const recovery = journal.calls.slice(before);
      expect(recovery.filter((call) => call.startsWith("recoverAndCommit")).sort()).toEqual([
        "recoverAndCommit t1",
        "recoverAndCommit t2",
        "recoverAndCommit t4",
        "recoverAndCommit t5",
      ]);
      expect(recovery.filter((call) => call.startsWith("recoverAndAbort")).sort()).toEqual([
        "recoverAndAbort t3",
        "recoverAndAbort t6",
      ]);
      expect(recovery.filter((call) => call.startsWith("finishRecovering"))).toHaveLength(newParallelism);
      expect([...journal.committed].sort()).toEqual(["s0-1", "s0-2", "s1-1", "s1-2"]);
    });
  }

  it("gives every old subtask's transactions to new subtask old % parallelism, which also cleans up after it", async () => {
    const journal = new SinkJournal();
    const old: HarnessCheckpoint[] = [];
    // Three subtasks, each with one pending transaction (checkpoint 1) and one open one.
    for (const subtaskIndex of [0, 1, 2]) {
      const { harness } = setUp({}, journal, { subtaskIndex, parallelism: 3 });
      await harness.initialize();
      await harness.write(`s${subtaskIndex}`);
      old.push(await harness.snapshot(1));
      await harness.write(`s${subtaskIndex}-open`);
    }
    // Union state: both new subtasks see all six elements and keep their own.
    const states = redistributeOperatorState(
      old.map((checkpoint) => checkpoint.state),
      2,
    );
    expect(states.map((state) => state["pending-transactions"]?.elements.length)).toEqual([6, 6]);
    const cleanedUpAfter: number[][] = [];
    class Owner extends RecordingSink {
      protected override finishRecoveringTransactions(): void {
        cleanedUpAfter.push([...this.recoveredSubtaskIndexes()]);
      }
    }
    const recoveredBy: string[][] = [];
    for (const [subtaskIndex, state] of states.entries()) {
      const before = journal.calls.length;
      const sink = new Owner(journal, { commitRetry: fastRetry });
      await new SinkTestHarness(sink, { subtaskIndex, parallelism: 2 }).initialize({
        checkpointId: 1,
        state,
      });
      recoveredBy.push(journal.calls.slice(before).filter((call) => call.startsWith("recover")));
    }
    // Old subtask 0 wrote t1 (pending) and t2 (open), subtask 1 t3/t4, subtask 2 t5/t6.
    expect(recoveredBy).toEqual([
      ["recoverAndCommit t1", "recoverAndCommit t5", "recoverAndAbort t2", "recoverAndAbort t6"],
      ["recoverAndCommit t3", "recoverAndAbort t4"],
    ]);
    expect(cleanedUpAfter).toEqual([[0, 2], [1]]);
    expect([...journal.committed].sort()).toEqual(["s0", "s1", "s2"]);
  });

  it("recovers only its own subtask index on a fresh start and after scaling up", async () => {
    const journal = new SinkJournal();
    const seen: number[][] = [];
    class Owner extends RecordingSink {
      protected override finishRecoveringTransactions(): void {
        seen.push([...this.recoveredSubtaskIndexes()]);
      }
    }
    const harness = new SinkTestHarness(new Owner(journal), { subtaskIndex: 1, parallelism: 2 });
    await harness.initialize();
    const checkpoint = await harness.snapshot(1);
    const [, , third] = redistributeOperatorState([{}, checkpoint.state], 3);
    await new SinkTestHarness(new Owner(journal), { subtaskIndex: 2, parallelism: 3 }).initialize({
      checkpointId: 1,
      state: third ?? {},
    });
    expect(seen).toEqual([[1], [2]]);
  });
});

describe("TwoPhaseCommitSink writes", () => {
  it("uses invokeBatch when the author gives one", async () => {
    const batches: string[][] = [];
    class Batching extends RecordingSink {
      protected override invokeBatch(transaction: RecordedTransaction, values: readonly string[]): void {
        batches.push([...values]);
        transaction.values.push(...values);
      }
    }
    const journal = new SinkJournal();
    const harness = new SinkTestHarness(new Batching(journal));
    await harness.initialize();
    await harness.write("a", "b", "c");
    expect(batches).toEqual([["a", "b", "c"]]);
    expect(journal.callsOf("invoke")).toEqual([]);
    await harness.checkpoint(1);
    expect(journal.committed).toEqual(["a", "b", "c"]);
  });

  it("falls back to invoke per record, in order, also when invoke is asynchronous", async () => {
    const order: string[] = [];
    class Slow extends TwoPhaseCommitSink<string, { values: string[] }> {
      protected beginTransaction() {
        return { values: [] };
      }
      protected async invoke(transaction: { values: string[] }, value: string, _context: SinkContext) {
        await new Promise((resolve) => setTimeout(resolve, value === "a" ? 5 : 0));
        order.push(value);
        transaction.values.push(value);
      }
      protected preCommit(_transaction: unknown, _checkpoint: FunctionSnapshotContext) {}
      protected commit() {}
      protected abort() {}
    }
    const sink = new Slow();
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.write("a", "b", "c");
    expect(order).toEqual(["a", "b", "c"]);
    expect(sink.currentTransaction()).toEqual({ values: ["a", "b", "c"] });
  });

  it("stays synchronous with a synchronous invoke", async () => {
    const { sink, harness } = setUp();
    await harness.initialize();
    const context = { timestamp: undefined, currentWatermark: 0, splitId: "0" };
    expect(sink.writeBatch(["a", "b"], context)).toBeUndefined();
    expect(sink.write("c", context)).toBeUndefined();
  });

  it("names itself after its class unless given a name, and binds the name to its log lines", async () => {
    expect(new RecordingSink(new SinkJournal()).name).toBe("RecordingSink");
    const { harness } = setUp({ name: "orders-out" });
    await harness.initialize();
    await harness.snapshot(1);
    expect(harness.logger.entries.some((entry) => entry.fields.sink === "orders-out")).toBe(true);
  });
});

describe("TwoPhaseCommitSink options", () => {
  const invalid: Array<[string, TwoPhaseCommitSinkOptions<RecordedTransaction>]> = [
    ["transactionTimeout", { transactionTimeout: 0 }],
    ["transactionTimeout", { transactionTimeout: Number.NaN }],
    ["transactionTimeoutWarningRatio", { transactionTimeoutWarningRatio: 1.5 }],
    ["transactionTimeoutWarningRatio", { transactionTimeoutWarningRatio: 0 }],
    ["ignoreFailuresAfterTransactionTimeout", { ignoreFailuresAfterTransactionTimeout: true }],
    ["commitRetry.maxAttempts", { commitRetry: { maxAttempts: 0 } }],
    ["commitRetry.maxAttempts", { commitRetry: { maxAttempts: 2.5 } }],
    ["commitRetry.initialDelay", { commitRetry: { initialDelay: -1 } }],
    ["commitRetry.maxDelay", { commitRetry: { initialDelay: 100, maxDelay: 50 } }],
    ["commitRetry.multiplier", { commitRetry: { multiplier: 0.5 } }],
  ];
  for (const [setting, options] of invalid) {
    it(`rejects a bad ${setting}: ${JSON.stringify(options)}`, () => {
      const attempt = () => new RecordingSink(new SinkJournal(), options);
      expect(attempt).toThrow(ConfigurationError);
      expect(attempt).toThrow(expect.objectContaining({ setting }));
    });
  }

  it("accepts good settings", () => {
    expect(
      () =>
        new RecordingSink(new SinkJournal(), {
          transactionTimeout: 60_000,
          transactionTimeoutWarningRatio: 1,
          ignoreFailuresAfterTransactionTimeout: true,
          commitRetry: { maxAttempts: 1, initialDelay: 0, maxDelay: 0, multiplier: 1 },
        }),
    ).not.toThrow();
  });
});

describe("TwoPhaseCommitSink with backgroundCommits", () => {
  /** A RecordingSink whose commits wait until the test opens the gate. */
  class GatedSink extends RecordingSink {
    private gate: { promise: Promise<void>; open: () => void } = GatedSink.newGate();
    static newGate() {
      let open = () => {};
      const promise = new Promise<void>((resolve) => {
        open = resolve;
      });
      return { promise, open };
    }
    private released = false;
    /** Lets the commit waiting now through. */
    openGate(): void {
      this.gate.open();
      this.gate = GatedSink.newGate();
    }
    /** Lets every commit through from now on. */
    release(): void {
      this.released = true;
      this.gate.open();
    }
    protected override async commit(transaction: RecordedTransaction): Promise<void> {
      this.journal.calls.push(`commit-start ${transaction.id}`);
      if (!this.released) await this.gate.promise;
      super.commit(transaction);
    }
  }

  function gated(journal = new SinkJournal()) {
    const sink = new GatedSink(journal, { commitRetry: fastRetry, backgroundCommits: true });
    return { journal, sink, harness: new SinkTestHarness(sink) };
  }

  it("returns from the notification while the commit runs; the transaction stays pending in checkpoints taken meanwhile", async () => {
    const { journal, sink, harness } = gated();
    await harness.initialize();
    await harness.write("a");
    await harness.checkpoint(1); // snapshot + notification, which returns with the commit still running
    expect(journal.callsOf("commit-start")).toEqual(["commit-start t1"]);
    expect(journal.committed).toEqual([]);
    await harness.write("b"); // records keep flowing into the next transaction
    const second = await harness.snapshot(2);
    expect(sink.pendingCheckpointIds()).toEqual([1, 2]);
    sink.openGate();
    await sink.awaitBackgroundCommit();
    expect(journal.committed).toEqual(["a"]);
    expect(sink.pendingCheckpointIds()).toEqual([2]);
    // A crash now: checkpoint 2 still holds t1, whose commit is simply repeated (idempotent).
    const restarted = new SinkTestHarness(new RecordingSink(journal, { commitRetry: fastRetry }));
    await restarted.initialize(second);
    expect(journal.callsOf("recoverAndCommit")).toEqual(["recoverAndCommit t1", "recoverAndCommit t2"]);
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("runs one commit at a time, in order: the next notification waits for the previous commit", async () => {
    const { journal, sink, harness } = gated();
    await harness.initialize();
    await harness.write("a");
    await harness.checkpoint(1);
    await harness.write("b");
    await harness.snapshot(2);
    let secondReturned = false;
    const second = harness.notifyComplete(2).then(() => {
      secondReturned = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(secondReturned).toBe(false);
    expect(journal.callsOf("commit-start")).toEqual(["commit-start t1"]);
    sink.openGate();
    await second;
    expect(journal.callsOf("commit-start")).toEqual(["commit-start t1", "commit-start t2"]);
    sink.openGate();
    await sink.awaitBackgroundCommit();
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("fails the job at the next call when a background commit fails for good, keeping the transaction pending", async () => {
    const { journal, sink, harness } = gated();
    await harness.initialize();
    await harness.write("a");
    journal.failCommit("t1", Number.POSITIVE_INFINITY);
    await harness.checkpoint(1);
    sink.release();
    await expect(sink.awaitBackgroundCommit()).rejects.toMatchObject({ code: "COMMIT_FAILED" });
    await expect(harness.write("b")).rejects.toMatchObject({ code: "COMMIT_FAILED" });
    await expect(harness.snapshot(2)).rejects.toMatchObject({ code: "COMMIT_FAILED" });
    expect(sink.pendingCheckpointIds()).toEqual([1]);
    expect(harness.logger.entries.some((entry) => entry.message.startsWith("background commit failed"))).toBe(
      true,
    );
  });

  it("commits inline after finish(), so a bounded job ends with its output committed", async () => {
    const { journal, sink, harness } = gated();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await sink.finish();
    let returned = false;
    const final = harness.notifyComplete(1).then(() => {
      returned = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(returned).toBe(false);
    sink.openGate();
    await final;
    expect(journal.committed).toEqual(["a"]);
  });

  it("asks commitsInBackground() at every notification: a subclass decides once it runs", async () => {
    class Deciding extends GatedSink {
      background = false;
      protected override commitsInBackground(): boolean {
        return this.background;
      }
    }
    const journal = new SinkJournal();
    const sink = new Deciding(journal, { commitRetry: fastRetry });
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    // Inline: the notification waits for the commit.
    let returned = false;
    const inline = harness.notifyComplete(1).then(() => {
      returned = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(returned).toBe(false);
    sink.openGate();
    await inline;
    expect(journal.committed).toEqual(["a"]);
    // In the background: the notification returns while the commit waits at the gate.
    sink.background = true;
    await harness.write("b");
    await harness.checkpoint(2);
    expect(journal.callsOf("commit-start")).toEqual(["commit-start t1", "commit-start t2"]);
    expect(journal.committed).toEqual(["a"]);
    sink.openGate();
    await sink.awaitBackgroundCommit();
    expect(journal.committed).toEqual(["a", "b"]);
  });

  it("close() waits for a commit still running", async () => {
    const { journal, sink, harness } = gated();
    await harness.initialize();
    await harness.write("a");
    await harness.checkpoint(1);
    let closed = false;
    const closing = harness.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed).toBe(false);
    sink.openGate();
    await closing;
    expect(journal.committed).toEqual(["a"]);
  });
});

describe("TwoPhaseCommitSink backgroundCommits at the final checkpoint", () => {
  it("commits inline when the snapshot is the job's final one (a stop, without finish())", async () => {
    const journal = new SinkJournal();
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    class Slow extends RecordingSink {
      protected override async commit(transaction: RecordedTransaction): Promise<void> {
        await gate;
        super.commit(transaction);
      }
    }
    const sink = new Slow(journal, { commitRetry: fastRetry, backgroundCommits: true });
    const harness = new SinkTestHarness(sink);
    await harness.initialize();
    await harness.write("a");
    await sink.snapshotState({ checkpointId: 1, checkpointTimestamp: Date.now(), isFinal: true });
    let returned = false;
    const notified = sink.notifyCheckpointComplete(1).then(() => {
      returned = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(returned).toBe(false);
    release();
    await notified;
    expect(journal.committed).toEqual(["a"]);
  });
});

describe("TwoPhaseCommitSink close after failed checkpoints (nothing outlives its attempt)", () => {
  it("aborts a pending transaction when every checkpoint that carried it failed for good", async () => {
    const { journal, sink, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1); // t1 pre-committed under 1
    await harness.notifyAborted(1); // 1 can never be restored
    await harness.close();
    expect(journal.callsOf("abort")).toEqual(["abort t1", "abort t2"]);
    expect(sink.pendingCheckpointIds()).toEqual([]);
  });

  it("keeps a pending transaction that a later checkpoint carried (it may be stored: a restart commits it)", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await harness.notifyAborted(1);
    await harness.snapshot(2); // carries t1 (still pending) and t2; its fate is unknown at close
    await harness.close();
    expect(journal.callsOf("abort")).toEqual(["abort t3"]);
  });

  it("keeps the pending transaction of a checkpoint whose fate is unknown", async () => {
    const { journal, harness } = setUp();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1); // stored or not: nobody said
    await harness.close();
    expect(journal.callsOf("abort")).toEqual(["abort t2"]);
  });
});

describe("TwoPhaseCommitSink close after a failed recovery", () => {
  it("never aborts a pending transaction restored from a checkpoint, even when no snapshot followed", async () => {
    const journal = new SinkJournal();
    const first = setUp({}, journal);
    await first.harness.initialize();
    await first.harness.write("a");
    const checkpoint = await first.harness.snapshot(1); // t1 pending in the stored checkpoint 1
    await first.harness.close();
    journal.failCommit("t1", 100); // the restarted attempt cannot commit it (a broker is down)
    const second = setUp({ commitRetry: { maxAttempts: 1 } }, journal);
    await expect(second.harness.initialize(checkpoint)).rejects.toThrow();
    await second.harness.close();
    expect(journal.callsOf("abort")).not.toContain("abort t1");
  });
});
