import { randomBytes } from "node:crypto";
import { type FunctionSnapshotContext, TwoPhaseCommitSink } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { type SinkContractCase, twoPhaseCommitSinkContractCases } from "./contract-cases.js";
import type { TwoPhaseCommitSinkContract } from "./contract-options.js";
import { ContractViolationError } from "./contract-run.js";
import { describeTwoPhaseCommitSink } from "./describe-two-phase-commit-sink.js";

// The leak checks of the contract suite: `lingering` (external state left behind after a case) and
// `maxTransactionHandleBytes` (records copied into the checkpoint), and failure messages that name
// the method and transaction. An in-memory "external system" that outlives sink instances, a tidy
// sink on it that passes every case with the checks on, and the classic leaks — sinks that never
// abort what they staged and sinks that carry their records in the handle — whose cases are run
// directly and asserted to FAIL with messages that say what is left and where.

/** One destination: staged transactions by id (tagged with the subtask), and what readers see. */
interface Store {
  readonly staged: Map<
    string,
    { readonly subtask: number; readonly incarnation: number; readonly values: string[] }
  >;
  readonly published: string[];
  readonly publishedIds: Set<string>;
}

const stores = new Map<string, Store>();

function storeOf(name: string): Store {
  let store = stores.get(name);
  if (store === undefined) {
    store = { staged: new Map(), published: [], publishedIds: new Set() };
    stores.set(name, store);
  }
  return store;
}

interface Txn {
  readonly id: string;
  /** Only the oversized sink keeps records here; the tidy one buffers them in memory. */
  readonly values?: string[];
}

/** A tidy sink: stages at pre-commit, publishes once per id at commit, and cleans up every leftover. */
class TidySink extends TwoPhaseCommitSink<string, Txn> {
  protected readonly store: Store;
  protected readonly buffers = new Map<string, string[]>();
  /** Set by the contract's `kill`: a method of this class that `kill` reaches without a cast. */
  killed = false;

  constructor(storeName: string) {
    super({ commitRetry: { initialDelay: 1, maxDelay: 4 } });
    this.store = storeOf(storeName);
  }

  markKilled(): void {
    this.killed = true;
  }

  protected beginTransaction(): Txn {
    const id = randomBytes(6).toString("hex");
    this.buffers.set(id, []);
    return { id };
  }

  protected invoke(txn: Txn, value: string): void {
    this.buffers.get(txn.id)?.push(value);
  }

  protected preCommit(txn: Txn, _checkpoint: FunctionSnapshotContext): void {
    const values = this.buffers.get(txn.id) ?? [];
    const { subtaskIndex, incarnation } = this.runtimeContext;
    this.store.staged.set(txn.id, { subtask: subtaskIndex, incarnation, values: [...values] });
    this.buffers.delete(txn.id);
  }

  protected commit(txn: Txn): void {
    if (this.store.publishedIds.has(txn.id)) return;
    const staged = this.store.staged.get(txn.id);
    if (staged === undefined) throw new Error(`transaction ${txn.id} was never staged`);
    this.store.published.push(...staged.values);
    this.store.publishedIds.add(txn.id);
    this.store.staged.delete(txn.id);
  }

  protected abort(txn: Txn): void {
    this.buffers.delete(txn.id);
    this.store.staged.delete(txn.id);
  }

  /**
   * What killed instances of this subtask staged and no restored checkpoint committed — not what a
   * newer incarnation staged (this instance may be a zombie that started late).
   */
  protected override finishRecoveringTransactions(): void {
    const mine = new Set(this.recoveredSubtaskIndexes());
    const { incarnation } = this.runtimeContext;
    for (const [id, staged] of this.store.staged) {
      if (mine.has(staged.subtask) && staged.incarnation <= incarnation) this.store.staged.delete(id);
    }
  }

  protected override describeTransaction(txn: Txn): string {
    return `txn-${txn.id}`;
  }
}

/** Leak: never removes what it staged — no abort, no clean-up after a kill. */
class NeverAbortsSink extends TidySink {
  protected override abort(txn: Txn): void {
    this.buffers.delete(txn.id);
  }

  protected override finishRecoveringTransactions(): void {}
}

/** Leak: copies every record into its transaction handle, so the checkpoint carries the data. */
class RecordsInHandleSink extends TidySink {
  protected override beginTransaction(): Txn {
    return { id: randomBytes(6).toString("hex"), values: [] };
  }

  protected override invoke(txn: Txn, value: string): void {
    txn.values?.push(value);
  }

  protected override preCommit(txn: Txn): void {
    this.store.staged.set(txn.id, {
      subtask: this.runtimeContext.subtaskIndex,
      incarnation: this.runtimeContext.incarnation,
      values: [...(txn.values ?? [])],
    });
  }
}

/** Bug: its preCommit throws at the second checkpoint of every instance (a plain Error of its own). */
class ThrowsInPreCommitSink extends TidySink {
  private preCommits = 0;

  protected override preCommit(txn: Txn, checkpoint: FunctionSnapshotContext): void {
    if (++this.preCommits === 2) throw new Error("the staging area is full");
    super.preCommit(txn, checkpoint);
  }
}

function contractOf<S extends TidySink>(
  name: string,
  create: (store: string) => S,
  more: Partial<TwoPhaseCommitSinkContract<string, S>> = {},
): TwoPhaseCommitSinkContract<string, S> {
  return {
    name,
    createSink: (scope) => create(scope.id),
    readCommitted: (scope) => [...storeOf(scope.id).published],
    createRecord: (index) => `r${index}`,
    lingering: (scope) => [...storeOf(scope.id).staged.keys()].map((id) => `staged txn-${id}`),
    // Typed with the sink's own class: no cast to reach markKilled.
    kill: (sink) => sink.markKilled(),
    teardown: (scope) => {
      stores.delete(scope.id);
    },
    ...more,
  };
}

async function failuresOf(cases: readonly SinkContractCase[]): Promise<Map<string, unknown>> {
  const failures = new Map<string, unknown>();
  for (const testCase of cases) {
    const error = await testCase.run().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    if (error !== undefined) failures.set(testCase.id, error);
  }
  return failures;
}

const bigRecord = (index: number) => `${"x".repeat(20_000)}-${index}`;

// The tidy sink passes every case with both checks on (default handle limit, and a tight one).
describeTwoPhaseCommitSink(contractOf("TidySink", (store) => new TidySink(store)));
describeTwoPhaseCommitSink(
  contractOf("TidySink (big records)", (store) => new TidySink(store), { createRecord: bigRecord }),
);
describeTwoPhaseCommitSink(
  contractOf("TidySink (256-byte handles)", (store) => new TidySink(store), {
    maxTransactionHandleBytes: 256,
  }),
);

describe("the contract suite catches leaks", () => {
  it("fails a sink that never aborts what it staged, naming what is left behind", async () => {
    const failures = await failuresOf(
      twoPhaseCommitSinkContractCases(contractOf("NeverAbortsSink", (store) => new NeverAbortsSink(store))),
    );
    // Every case where a staged transaction is given up: an aborted pre-commit, a kill before the
    // checkpoint was stored, an older checkpoint restored.
    expect([...failures.keys()]).toEqual(
      expect.arrayContaining([
        "throw-in-pre-commit",
        "kill-after-pre-commit",
        "kill-after-snapshot-before-stored",
        "restore-older-checkpoint",
      ]),
    );
    for (const [id, error] of failures) {
      expect(error, id).toBeInstanceOf(ContractViolationError);
      const message = (error as Error).message;
      expect(message).toMatch(
        new RegExp(
          `^NeverAbortsSink: ${id}: left \\d+ piece\\(s\\) of external state behind after the case ended`,
        ),
      );
      expect(message).toMatch(/staged txn-[0-9a-f]{12}/);
      expect((error as ContractViolationError).details.lingering).toEqual(
        expect.arrayContaining([expect.stringMatching(/^staged txn-/)]),
      );
    }
    // Cases without a given-up transaction pass: the check is about leaks, not noise.
    expect(failures.has("commits-each-checkpoint")).toBe(false);
  });

  it("fails a sink that copies every record into its transaction handle (default limit 64 KiB)", async () => {
    const failures = await failuresOf(
      twoPhaseCommitSinkContractCases(
        contractOf("RecordsInHandleSink", (store) => new RecordsInHandleSink(store), {
          createRecord: bigRecord,
        }),
      ),
    );
    const error = failures.get("commits-each-checkpoint");
    expect(error).toBeInstanceOf(ContractViolationError);
    expect((error as Error).message).toMatch(
      /^RecordsInHandleSink: commits-each-checkpoint: the transaction txn-[0-9a-f]{12} pre-committed for checkpoint 1 is stored as \d+ bytes in checkpoint 1, over maxTransactionHandleBytes \(65536\): a transaction handle must carry ids and positions, not the records/,
    );
    expect((error as ContractViolationError).details.handleBytes).toEqual([expect.any(Number)]);
    expect(((error as ContractViolationError).details.handleBytes as number[])[0]).toBeGreaterThan(80_000);
    // Every case that checkpoints records catches it.
    expect(failures.size).toBeGreaterThanOrEqual(20);
    expect(failures.has("no-input")).toBe(false);
  });

  it("applies a configured maxTransactionHandleBytes", async () => {
    const contract = contractOf("RecordsInHandleSink", (store) => new RecordsInHandleSink(store), {
      maxTransactionHandleBytes: 64,
      createRecord: (index) => `record-${index}-with-some-payload`,
    });
    const testCase = twoPhaseCommitSinkContractCases(contract).find(
      (each) => each.id === "commits-each-checkpoint",
    );
    const error = await testCase?.run().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect((error as Error).message).toMatch(/over maxTransactionHandleBytes \(64\)/);
    expect(() => twoPhaseCommitSinkContractCases({ ...contract, maxTransactionHandleBytes: 0 })).toThrow(
      /maxTransactionHandleBytes must be a whole number/,
    );
  });

  it("names the method, the transaction and the checkpoint when the sink's own step throws", async () => {
    const testCase = twoPhaseCommitSinkContractCases(
      contractOf("ThrowsInPreCommitSink", (store) => new ThrowsInPreCommitSink(store)),
    ).find((each) => each.id === "commits-each-checkpoint");
    const error = await testCase?.run().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ContractViolationError);
    expect((error as Error).message).toMatch(
      /^ThrowsInPreCommitSink: commits-each-checkpoint: preCommit of transaction txn-[0-9a-f]{12} for checkpoint 2 threw Error: the staging area is full$/,
    );
    // The sink's own error stays reachable, with its stack.
    expect(((error as Error).cause as Error).message).toBe("the staging area is full");
  });

  it("types kill with the sink's own class and calls it on the killed instance", async () => {
    const sinks: TidySink[] = [];
    const contract = contractOf("TidySink", (store) => {
      const sink = new TidySink(store);
      sinks.push(sink);
      return sink;
    });
    await twoPhaseCommitSinkContractCases(contract)
      .find((each) => each.id === "kill-after-invoke")
      ?.run();
    expect(sinks.map((sink) => sink.killed)).toEqual([true, false]);
  });
});
