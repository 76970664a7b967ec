import { randomBytes } from "node:crypto";
import { TwoPhaseCommitSink } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { type SinkContractCase, twoPhaseCommitSinkContractCases } from "./contract-cases.js";
import type { TwoPhaseCommitSinkContract } from "./contract-options.js";
import { ContractViolationError } from "./contract-run.js";
import { describeTwoPhaseCommitSink } from "./describe-two-phase-commit-sink.js";

// The contract suite must catch broken sinks. An in-memory "external system" with staged and
// published transactions (it outlives sink instances, as a database outlives a killed process), a
// correct sink on it that passes every case, and sinks with one classic bug each: their cases are
// run directly and the ones the bug must break are asserted to fail with a ContractViolationError.

/** One destination of the in-memory system: staged transactions by id, and what readers see. */
interface Bucket {
  readonly staged: Map<string, string[]>;
  readonly published: string[];
  readonly publishedIds: Set<string>;
}

const buckets = new Map<string, Bucket>();

function bucketOf(name: string): Bucket {
  let bucket = buckets.get(name);
  if (bucket === undefined) {
    bucket = { staged: new Map(), published: [], publishedIds: new Set() };
    buckets.set(name, bucket);
  }
  return bucket;
}

interface MemoryTransaction {
  readonly id: string;
  readonly values: string[];
}

/** A correct sink: stage at pre-commit, publish once per transaction id at commit, drop on abort. */
class MemorySink extends TwoPhaseCommitSink<string, MemoryTransaction> {
  protected readonly bucket: Bucket;

  constructor(bucketName: string) {
    super({ commitRetry: { initialDelay: 1 } });
    this.bucket = bucketOf(bucketName);
  }

  protected beginTransaction(): MemoryTransaction {
    return { id: randomBytes(6).toString("hex"), values: [] };
  }

  protected invoke(transaction: MemoryTransaction, value: string): void {
    transaction.values.push(value);
  }

  protected preCommit(transaction: MemoryTransaction): void {
    this.bucket.staged.set(transaction.id, [...transaction.values]);
  }

  protected commit(transaction: MemoryTransaction): void {
    if (this.bucket.publishedIds.has(transaction.id)) return;
    const staged = this.bucket.staged.get(transaction.id);
    if (staged === undefined) throw new Error(`transaction ${transaction.id} was never staged`);
    this.bucket.published.push(...staged);
    this.bucket.publishedIds.add(transaction.id);
    this.bucket.staged.delete(transaction.id);
  }

  protected abort(transaction: MemoryTransaction): void {
    this.bucket.staged.delete(transaction.id);
  }
}

/** Bug: commit is not idempotent — a repeated commit publishes the transaction again. */
class NonIdempotentCommitSink extends MemorySink {
  protected override preCommit(transaction: MemoryTransaction): void {
    this.bucket.staged.set(transaction.id, [...transaction.values]);
  }

  protected override commit(transaction: MemoryTransaction): void {
    // Publishes from the handle, without remembering what it published.
    this.bucket.published.push(...transaction.values);
  }
}

/** Bug: writes outside the transaction — records are published as they arrive. */
class WritesOutsideTransactionSink extends MemorySink {
  protected override invoke(transaction: MemoryTransaction, value: string): void {
    this.bucket.published.push(value);
    transaction.values.length = 0;
  }
}

/** Bug: publishes at pre-commit, before the checkpoint is durable. */
class PublishesAtPreCommitSink extends MemorySink {
  protected override preCommit(transaction: MemoryTransaction): void {
    super.preCommit(transaction);
    super.commit(transaction);
  }
}

/** Bug: recovery does not commit restored transactions (the author assumed they were committed). */
class SkipsRecoveryCommitSink extends MemorySink {
  protected override recoverAndCommit(): void {}
}

/** Bug: abort keeps the staged data and commit publishes everything staged, orphans included. */
class PublishesAllStagedSink extends MemorySink {
  protected override commit(): void {
    for (const [id, values] of this.bucket.staged) {
      this.bucket.published.push(...values);
      this.bucket.publishedIds.add(id);
    }
    this.bucket.staged.clear();
  }

  protected override abort(): void {}
}

/** Bug: the start cleans up every staged transaction, also those a newer incarnation staged. */
class CleansUpEverythingAtStartSink extends MemorySink {
  protected override finishRecoveringTransactions(): void {
    this.bucket.staged.clear();
  }
}

function contractOf(
  name: string,
  create: (bucket: string) => MemorySink,
): TwoPhaseCommitSinkContract<string> {
  return {
    name,
    createSink: (scope) => create(scope.id) as unknown as TwoPhaseCommitSink<string, unknown>,
    readCommitted: (scope) => [...bucketOf(scope.id).published],
    createRecord: (index) => `r${index}`,
    teardown: (scope) => {
      buckets.delete(scope.id);
    },
  };
}

describeTwoPhaseCommitSink(contractOf("MemorySink", (bucket) => new MemorySink(bucket)));

const broken: Array<{ name: string; create: (bucket: string) => MemorySink; mustFail: string[] }> = [
  {
    name: "NonIdempotentCommitSink",
    create: (bucket) => new NonIdempotentCommitSink(bucket),
    mustFail: [
      "commit-applied-then-retried",
      "kill-during-commit",
      "kill-after-commit",
      "kill-during-recovery",
      "restore-same-checkpoint-twice",
    ],
  },
  {
    name: "WritesOutsideTransactionSink",
    create: (bucket) => new WritesOutsideTransactionSink(bucket),
    mustFail: [
      "invisible-until-complete",
      "throw-in-invoke",
      "kill-after-invoke",
      "kill-before-first-checkpoint",
    ],
  },
  {
    name: "PublishesAtPreCommitSink",
    create: (bucket) => new PublishesAtPreCommitSink(bucket),
    mustFail: [
      "invisible-until-complete",
      "throw-in-pre-commit",
      "kill-after-pre-commit",
      "notify-aborted-then-complete",
    ],
  },
  {
    name: "SkipsRecoveryCommitSink",
    create: (bucket) => new SkipsRecoveryCommitSink(bucket),
    mustFail: [
      "throw-in-commit",
      "kill-after-checkpoint-stored",
      "kill-with-several-pending",
      "two-subtasks",
    ],
  },
  {
    name: "PublishesAllStagedSink",
    create: (bucket) => new PublishesAllStagedSink(bucket),
    mustFail: ["kill-after-pre-commit", "kill-after-snapshot-before-stored", "throw-in-pre-commit"],
  },
  {
    name: "CleansUpEverythingAtStartSink",
    create: (bucket) => new CleansUpEverythingAtStartSink(bucket),
    mustFail: ["zombie-start"],
  },
];

async function outcomeOf(testCase: SinkContractCase): Promise<unknown> {
  return testCase.run().then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("the contract suite catches broken sinks", () => {
  for (const { name, create, mustFail } of broken) {
    it(`${name}: the cases its bug breaks fail with a ContractViolationError`, async () => {
      const cases = twoPhaseCommitSinkContractCases(contractOf(name, create));
      const failed: string[] = [];
      for (const testCase of cases) {
        const error = await outcomeOf(testCase);
        if (error === undefined) continue;
        failed.push(testCase.id);
        expect(error, `${testCase.id}: ${String(error)}`).toBeInstanceOf(ContractViolationError);
      }
      expect(failed).toEqual(expect.arrayContaining(mustFail));
    });
  }

  it("names the rule and the methods when a zombie's start cleaned up a newer incarnation's transaction", async () => {
    const testCase = twoPhaseCommitSinkContractCases(
      contractOf("CleansUpEverythingAtStartSink", (bucket) => new CleansUpEverythingAtStartSink(bucket)),
    ).find((each) => each.id === "zombie-start");
    const error = await outcomeOf(testCase!);
    expect(error).toBeInstanceOf(ContractViolationError);
    const { message, details } = error as ContractViolationError;
    expect(message).toMatch(/^CleansUpEverythingAtStartSink: zombie-start: /);
    expect(message).toContain("`this.runtimeContext.incarnation`");
    expect(message).toContain("in every transaction id in `beginTransaction`");
    expect(message).toContain(
      "in `finishRecoveringTransactions` never clean up (abort, roll back, delete) a transaction whose incarnation is newer",
    );
    // What the suite saw stays in the message.
    expect(message).toMatch(/What the suite saw: .*was never staged/);
    expect(details).toMatchObject({ caseId: "zombie-start", rule: expect.stringContaining("incarnation") });
  });

  it("names what is wrong: the duplicated records of a non-idempotent commit", async () => {
    const testCase = twoPhaseCommitSinkContractCases(
      contractOf("NonIdempotentCommitSink", (bucket) => new NonIdempotentCommitSink(bucket)),
    ).find((each) => each.id === "kill-during-commit");
    const error = await outcomeOf(testCase!);
    expect(error).toBeInstanceOf(ContractViolationError);
    expect((error as ContractViolationError).message).toMatch(/duplicated "r0" ×2/);
    expect((error as ContractViolationError).details.duplicated).toEqual([
      '"r0" ×2',
      '"r1" ×2',
      '"r2" ×2',
      '"r3" ×2',
    ]);
  });
});
