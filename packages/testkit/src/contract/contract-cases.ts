import { randomBytes } from "node:crypto";
import type { TwoPhaseCommitSink } from "@onceflow/core";
import type { SinkContractScope, TwoPhaseCommitSinkContract } from "./contract-options.js";
import { ContractSubtask, ContractViolationError, describeFailure, expectCommitted } from "./contract-run.js";

/**
 * One case of the contract suite, runnable without a test framework: `run()` resolves when the
 * sink kept the contract and rejects (usually with a {@link ContractViolationError}) when not.
 *
 * @example
 * ```ts
 * for (const testCase of twoPhaseCommitSinkContractCases(contract)) await testCase.run();
 * ```
 */
export interface SinkContractCase {
  /** Stable id, e.g. `kill-during-commit` (use it in `skip`). */
  readonly id: string;
  /** One line on what the case does and what it checks. */
  readonly title: string;
  /** Set when the contract's `skip` names this case. */
  readonly skipReason: string | undefined;
  run(): Promise<void>;
}

type Sink<IN> = TwoPhaseCommitSink<IN, unknown>;
type Body<IN, S extends Sink<IN>> = (subtask: ContractSubtask<IN, S>, check: Checks) => Promise<void>;

interface Checks {
  /** The output is exactly these record indexes, each once. */
  exactly(indexes: readonly number[], when: string): Promise<void>;
  /** The output is exactly the whole input, each once. */
  all(when?: string): Promise<void>;
}

interface CaseDefinition<IN, S extends Sink<IN>> {
  readonly id: string;
  readonly title: string;
  /** Records in the input (default: 4 checkpoints' worth). */
  readonly records?: (perCheckpoint: number) => number;
  readonly body: Body<IN, S>;
}

const range = (count: number): number[] => Array.from({ length: count }, (_, index) => index);

/**
 * The cases of the two-phase-commit sink contract, framework-free: each drives new sink instances
 * through the runtime's call order (via `SinkTestHarness`) with one failure injected, and ends by
 * comparing what {@link TwoPhaseCommitSinkContract.readCommitted} shows with the input.
 *
 * What a "kill" is here: the instance is abandoned where it stands — no `close()`, no abort, none
 * of its code runs after the kill point (injected at an author step, see {@link injectFaults}) —
 * and a NEW instance is restored from the last stored checkpoint, replaying the input from the
 * position that checkpoint recorded, as the runtime does after a SIGKILL. It models a kill of the
 * process, not of the machine: data the sink handed to the OS or to the external system stays. The
 * process-level proofs (real SIGKILL of a child process) are the crash and chaos suites.
 *
 * Checkpoint ids follow the runtime: after a restore they continue from the highest stored id, so
 * the id of a checkpoint that was never stored is used again.
 *
 * "Restoring an older checkpoint" (a savepoint chosen by the user) guarantees: the restored
 * checkpoint's pending transactions are committed exactly once, nothing is lost, and transactions
 * pre-committed for checkpoints after it that never committed are discarded. Records that later
 * checkpoints already committed are replayed, so they appear twice unless the destination is
 * idempotent by key (`idempotentByKey: true` then demands exactly once) — as in Flink, where
 * restoring older state is the user's choice.
 *
 * @example
 * ```ts
 * const cases = twoPhaseCommitSinkContractCases({ name: "MySink", createSink, readCommitted, createRecord: String });
 * await cases.find((each) => each.id === "kill-during-commit")?.run();
 * ```
 */
export function twoPhaseCommitSinkContractCases<
  IN,
  S extends TwoPhaseCommitSink<IN, unknown> = TwoPhaseCommitSink<IN, unknown>,
>(contract: TwoPhaseCommitSinkContract<IN, S>): SinkContractCase[] {
  const perCheckpoint = contract.recordsPerCheckpoint ?? 4;
  if (!(Number.isInteger(perCheckpoint) && perCheckpoint >= 1)) {
    throw new RangeError(`recordsPerCheckpoint must be a whole number of at least 1, got ${perCheckpoint}`);
  }
  const maxHandle = contract.maxTransactionHandleBytes;
  if (maxHandle !== undefined && !(Number.isInteger(maxHandle) && maxHandle >= 1)) {
    throw new RangeError(
      `maxTransactionHandleBytes must be a whole number of bytes of at least 1, got ${maxHandle}`,
    );
  }
  const R = perCheckpoint;
  // The steps most cases begin and end with.
  const startAndWrite = async (s: ContractSubtask<IN, S>) => {
    await s.start();
    await s.write(R);
  };
  const finishAndCheck = async (s: ContractSubtask<IN, S>, check: Checks) => {
    await s.finish(R);
    await check.all();
  };
  const recoverAndFinish = async (s: ContractSubtask<IN, S>, check: Checks) => {
    await s.start({ restore: "latest" });
    await finishAndCheck(s, check);
  };
  const definitions: CaseDefinition<IN, S>[] = [
    {
      id: "commits-each-checkpoint",
      title: "several checkpoints, each committed on completion: every record once",
      body: async (s, check) => {
        await startAndWrite(s);
        const first = await s.checkpoint();
        await check.exactly(s.inputBefore(first), "after checkpoint 1 completed");
        await s.write(R);
        await s.checkpoint();
        await finishAndCheck(s, check);
      },
    },
    {
      id: "invisible-until-complete",
      title:
        "nothing is visible after invoke, after pre-commit, or after the checkpoint is stored; all of it after notifyCheckpointComplete",
      body: async (s, check) => {
        await startAndWrite(s);
        await check.exactly([], "after invoke, before the checkpoint");
        const id = await s.snapshot();
        await check.exactly([], "after pre-commit (snapshotState)");
        s.store(id);
        await check.exactly([], "after the checkpoint was stored, before notifyCheckpointComplete");
        await s.notifyComplete(id);
        await check.exactly(s.inputBefore(id), "after notifyCheckpointComplete");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "throw-in-invoke",
      title:
        "invoke throws after writing into the transaction: the attempt fails, close aborts, the restore replays",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        s.faults.add({ step: "invoke", when: "after", fault: "fatal" });
        await s.expectFailureOf("invoke", () => s.write(R));
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "throw-in-pre-commit",
      title:
        "preCommit throws after its work: the checkpoint fails, close aborts the pre-committed transaction, the restore replays",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        s.faults.add({ step: "preCommit", when: "after", fault: "fatal" });
        await s.expectFailureOf("preCommit", () => s.snapshot());
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "throw-in-commit",
      title: "commit fails for good: the attempt fails, the restore commits the pending transaction",
      body: async (s, check) => {
        await startAndWrite(s);
        const id = await s.snapshot();
        s.store(id);
        s.faults.add({ step: "commit", when: "before", fault: "fatal" });
        await s.expectFailureOf("commit", () => s.notifyComplete(id));
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "commit-succeeds-on-retry",
      title: "commit fails once before reaching the external system, then succeeds on retry",
      body: async (s, check) => {
        await startAndWrite(s);
        s.faults.add({ step: "commit", when: "before", fault: "throw" });
        const id = await s.checkpoint();
        await check.exactly(s.inputBefore(id), "after the retried commit");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "commit-applied-then-retried",
      title: "commit reaches the external system but reports an error once: the retry must be idempotent",
      body: async (s, check) => {
        await startAndWrite(s);
        s.faults.add({ step: "commit", when: "after", fault: "throw" });
        const id = await s.checkpoint();
        await check.exactly(s.inputBefore(id), "after the retried commit");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "throw-in-recover-and-commit",
      title: "recoverAndCommit fails during the restore: the next restore of the same checkpoint commits it",
      body: async (s, check) => {
        await startAndWrite(s);
        s.store(await s.snapshot());
        await s.kill();
        await s.expectFailureOf("recoverAndCommit", () =>
          s.start({
            restore: "latest",
            faults: [{ step: "recoverAndCommit", when: "before", fault: "fatal" }],
          }),
        );
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-before-first-checkpoint",
      title:
        "killed after invoke, before any checkpoint: a fresh start must not let the dead instance's data in",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.kill();
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-after-invoke",
      title: "killed after invoke, between two checkpoints: the open transaction is abandoned and replayed",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        await s.kill();
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-after-pre-commit",
      title:
        "killed right after preCommit, before the next transaction began: the checkpoint never completes",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        s.faults.add({ step: "preCommit", when: "after", fault: "kill" });
        await s.expectKilledBy("preCommit", () => s.snapshot());
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-after-snapshot-before-stored",
      title:
        "killed after snapshotState returned, before the checkpoint was stored: its transaction is discarded, its id reused",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        await s.snapshot();
        await s.write(R);
        await s.kill();
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-after-checkpoint-stored",
      title: "killed after the checkpoint was stored, before notifyCheckpointComplete: recovery commits it",
      body: async (s, check) => {
        await startAndWrite(s);
        const id = await s.snapshot();
        s.store(id);
        await s.write(R);
        await s.kill();
        await check.exactly([], "after the kill, before recovery (the commit had not run)");
        await s.start({ restore: "latest" });
        await check.exactly(s.inputBefore(id), "after recovery");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "kill-during-commit",
      title:
        "killed after commit reached the external system, before the sink knew: recovery commits again, idempotently",
      body: async (s, check) => {
        await startAndWrite(s);
        const id = await s.snapshot();
        s.store(id);
        s.faults.add({ step: "commit", when: "after", fault: "kill" });
        await s.expectKilledBy("commit", () => s.notifyComplete(id));
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-after-commit",
      title:
        "killed after notifyCheckpointComplete returned: recovery's commit of the committed transaction changes nothing",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        await s.kill();
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-during-recovery",
      title:
        "killed right after recoverAndCommit during a restore: the next restore commits the same transaction again",
      body: async (s, check) => {
        await startAndWrite(s);
        s.store(await s.snapshot());
        await s.kill();
        await s.expectKilledBy("recoverAndCommit", () =>
          s.start({
            restore: "latest",
            faults: [{ step: "recoverAndCommit", when: "after", fault: "kill" }],
          }),
        );
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-during-recovery-abort",
      title:
        "killed right after recoverAndAbort of the restored open transaction: the next restore aborts it again",
      body: async (s, check) => {
        await startAndWrite(s);
        await s.checkpoint();
        await s.write(R);
        s.store(await s.snapshot());
        await s.write(R);
        await s.kill();
        await s.expectKilledBy("recoverAndAbort", () =>
          s.start({ restore: "latest", faults: [{ step: "recoverAndAbort", when: "after", fault: "kill" }] }),
        );
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "kill-with-several-pending",
      title:
        "two stored checkpoints whose notifications were lost, then a kill: recovery commits both, in order",
      body: async (s, check) => {
        await startAndWrite(s);
        s.store(await s.snapshot());
        await s.write(R);
        s.store(await s.snapshot());
        await s.write(R);
        await s.kill();
        await recoverAndFinish(s, check);
      },
    },
    {
      id: "notify-complete-twice",
      title: "notifyCheckpointComplete repeated: the second one commits nothing again",
      body: async (s, check) => {
        await startAndWrite(s);
        const id = await s.checkpoint();
        await s.notifyComplete(id);
        await check.exactly(s.inputBefore(id), "after the repeated notification");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "notify-out-of-order",
      title: "notifications out of order (2 before 1): checkpoint 2 subsumes 1, the late 1 commits nothing",
      body: async (s, check) => {
        await startAndWrite(s);
        const first = await s.snapshot();
        s.store(first);
        await s.write(R);
        const second = await s.snapshot();
        s.store(second);
        await s.notifyComplete(second);
        await s.notifyComplete(first);
        await check.exactly(s.inputBefore(second), "after notifications 2 then 1");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "notify-aborted-then-complete",
      title: "checkpoint 1 aborted: its transaction waits and commits with checkpoint 2",
      body: async (s, check) => {
        await startAndWrite(s);
        const first = await s.snapshot();
        await s.notifyAborted(first);
        await check.exactly([], "after the aborted checkpoint");
        await s.write(R);
        const second = await s.checkpoint();
        await check.exactly(s.inputBefore(second), "after checkpoint 2 completed");
        await finishAndCheck(s, check);
      },
    },
    {
      id: "restore-same-checkpoint-twice",
      title:
        "the same checkpoint restored twice (the first restored instance killed after writing): commits once, nothing of the dead instances leaks",
      body: async (s, check) => {
        await startAndWrite(s);
        const id = await s.snapshot();
        s.store(id);
        await s.kill();
        await s.start({ restore: id });
        await s.write(R);
        await s.kill();
        await s.start({ restore: id });
        await finishAndCheck(s, check);
      },
    },
    {
      id: "restore-older-checkpoint",
      title:
        "an older checkpoint restored after newer ones: its transactions commit once, nothing is lost, uncommitted later transactions are discarded",
      records: (r) => 4 * r,
      body: async (s) => {
        await startAndWrite(s);
        const first = await s.checkpoint();
        await s.write(R);
        const second = await s.checkpoint();
        await s.write(R);
        s.store(await s.snapshot());
        await s.write(R);
        await s.kill();
        await s.start({ restore: first });
        await s.finish(R);
        const beforeFirst = s.inputBefore(first);
        const replayedCommitted = s.inputBefore(second).slice(beforeFirst.length);
        const rest = s.input.slice(beforeFirst.length + replayedCommitted.length);
        await expectCommitted(
          contract,
          [s.scope],
          contract.idempotentByKey === true
            ? { exactlyOnce: s.input }
            : { exactlyOnce: [...beforeFirst, ...rest], atMostTwice: replayedCommitted },
          `after restoring checkpoint ${first} (older than the committed checkpoint ${second})`,
        );
      },
    },
    {
      id: "empty-transactions",
      title:
        "checkpoints without records (also pending at a kill, and restored) commit nothing and break nothing",
      body: async (s, check) => {
        await s.start();
        await s.checkpoint();
        s.store(await s.snapshot());
        await s.kill();
        await check.exactly([], "after empty checkpoints and a kill");
        await s.start({ restore: "latest" });
        await s.checkpoint();
        await s.write(R);
        await s.checkpoint();
        await s.checkpoint();
        await finishAndCheck(s, check);
      },
    },
    {
      id: "no-input",
      title: "a job without input: empty checkpoints, the final one, close: nothing committed",
      records: () => 0,
      body: async (s, check) => {
        await s.start();
        await s.checkpoint();
        await s.checkpoint();
        await s.finish(R);
        await check.exactly([], "at the end");
      },
    },
  ];

  const cases: SinkContractCase[] = definitions.map((definition) => ({
    id: definition.id,
    title: definition.title,
    skipReason: contract.skip?.[definition.id],
    run: () => runSingle(contract, definition, perCheckpoint),
  }));
  cases.push({
    id: "zombie-start",
    title:
      "a zombie of an older incarnation starts its sink after a newer instance pre-committed a stored checkpoint: the newer one's restart still commits it",
    skipReason: contract.skip?.["zombie-start"],
    run: () => runZombieStart(contract, perCheckpoint),
  });
  cases.push({
    id: "two-subtasks",
    title:
      "two subtasks write side by side; one is killed between stored checkpoint and commit and restored: each record once",
    skipReason: contract.skip?.["two-subtasks"],
    run: () => runTwoSubtasks(contract, perCheckpoint),
  });
  return cases;
}

/** A scope id: short, unique, lowercase letters/digits/underscores, starting with a letter. */
function newScopeId(contractName: string, caseId: string): string {
  const name =
    contractName
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "")
      .slice(0, 12) || "sink";
  const casePart = caseId
    .split("-")
    .map((word) => word[0] ?? "")
    .join("");
  return `c${name}_${casePart}_${randomBytes(4).toString("hex")}`;
}

/**
 * Runs a case between `setup` and `teardown`. A failure becomes a {@link ContractViolationError}
 * that names the case and, when an author step threw, the step and transaction (the original error
 * is its `cause`). After a case that passed, `lingering` must list nothing.
 */
async function withScopes<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  scopes: readonly SinkContractScope[],
  body: () => Promise<void>,
): Promise<void> {
  const first = scopes[0];
  if (first === undefined) throw new Error("withScopes: no scope");
  await contract.setup?.(first);
  try {
    try {
      await body();
    } catch (error) {
      throw asCaseFailure(contract.name, first.caseId, error);
    }
    await expectNothingLingering(contract, first);
  } finally {
    await contract.teardown?.(first);
  }
}

function asCaseFailure(name: string, caseId: string, error: unknown): ContractViolationError {
  if (error instanceof ContractViolationError) return error;
  return new ContractViolationError(`${name}: ${caseId}: ${describeFailure(error)}`, { caseId }, error);
}

async function expectNothingLingering<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  scope: SinkContractScope,
): Promise<void> {
  if (contract.lingering === undefined) return;
  const left = [...(await contract.lingering(scope))];
  if (left.length === 0) return;
  const shown =
    left.length > 10 ? `${left.slice(0, 10).join(", ")} … (${left.length} in all)` : left.join(", ");
  throw new ContractViolationError(
    `${contract.name}: ${scope.caseId}: left ${left.length} piece(s) of external state behind after the case ended (every sink instance was closed, or recovered by the next one): ${shown}. What a transaction staged or prepared must go when it commits or aborts — in abort, recoverAndAbort, or finishRecoveringTransactions for what a killed instance left`,
    { caseId: scope.caseId, lingering: left },
  );
}

function checksFor<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  scopes: readonly SinkContractScope[],
  input: readonly number[],
): Checks {
  return {
    exactly: (indexes, when) => expectCommitted(contract, scopes, { exactlyOnce: indexes }, when),
    all: (when = "at the end") => expectCommitted(contract, scopes, { exactlyOnce: input }, when),
  };
}

async function runSingle<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  definition: CaseDefinition<IN, S>,
  perCheckpoint: number,
): Promise<void> {
  const scope: SinkContractScope = {
    id: newScopeId(contract.name, definition.id),
    caseId: definition.id,
    subtaskIndex: 0,
    parallelism: 1,
  };
  const input = range(definition.records?.(perCheckpoint) ?? 4 * perCheckpoint);
  const subtask = new ContractSubtask(contract, scope, input);
  await withScopes(contract, [scope], () => definition.body(subtask, checksFor(contract, [scope], input)));
}

/**
 * A process frozen after its incarnation claim (a long GC pause, SIGSTOP) resumes after a newer one
 * took the subtask over, and its sink starts — and cleans up "leftovers" — only then. What the newer
 * instance pre-committed for a stored checkpoint is not the zombie's to roll back: the sink must
 * leave every transaction of a newer incarnation alone (put the incarnation in transaction ids).
 */
async function runZombieStart<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  R: number,
): Promise<void> {
  const scope: SinkContractScope = {
    id: newScopeId(contract.name, "zombie-start"),
    caseId: "zombie-start",
    subtaskIndex: 0,
    parallelism: 1,
  };
  const input = range(2 * R);
  // The zombie claimed incarnation 1 and froze; the live instances are incarnations 2 and 3.
  const live = new ContractSubtask(contract, scope, input, 1);
  const zombie = new ContractSubtask(contract, scope, [], 0);
  const check = checksFor(contract, [scope], input);
  await withScopes(contract, [scope], async () => {
    await live.start();
    await live.write(R);
    const stored = await live.snapshot();
    live.store(stored);
    // The live instance dies before its commit (one process at a time runs here: sinks guard
    // against a second instance of the same subtask in one process).
    await live.kill();
    // The zombie's sink starts now, fresh (no checkpoint existed when it planned its restore), and
    // is then stopped (its checkpoints would be refused as SUPERSEDED).
    await zombie.start();
    await zombie.kill();
    try {
      await check.exactly([], "after the zombie's start, before the live instance's restart");
      // The live instance's restart restores the stored checkpoint.
      await live.start({ restore: "latest" });
      await check.exactly(live.inputBefore(stored), "after the restart restored the stored checkpoint");
    } catch (error) {
      throw zombieStartViolation(contract.name, error);
    }
    await live.finish(R);
    await check.all();
  });
}

/** What a sink must do so that a zombie's start leaves a newer incarnation's transactions alone. */
const NEWER_INCARNATION_RULE =
  "the transactions of a newer incarnation are not this instance's to clean up: put the incarnation (`this.runtimeContext.incarnation`, the runtime context's `incarnation`) in every transaction id in `beginTransaction`, and in `finishRecoveringTransactions` never clean up (abort, roll back, delete) a transaction whose incarnation is newer than this instance's — that instance is a zombie that resumed after a newer one started";

/**
 * A failure of the zombie-start case, with the rule it broke: the message names the methods where
 * the fix goes (the original failure is its `cause`, and stays in the message).
 */
function zombieStartViolation(name: string, error: unknown): ContractViolationError {
  const failure = error instanceof ContractViolationError ? error.message : describeFailure(error);
  return new ContractViolationError(
    `${name}: zombie-start: a sink of an older incarnation (a zombie) started after a newer one pre-committed a stored checkpoint, and that checkpoint's records did not commit as they should: ${NEWER_INCARNATION_RULE}. What the suite saw: ${failure}`,
    {
      caseId: "zombie-start",
      rule: NEWER_INCARNATION_RULE,
      ...(error instanceof ContractViolationError ? error.details : {}),
    },
    error,
  );
}

async function runTwoSubtasks<IN, S extends Sink<IN>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  R: number,
): Promise<void> {
  const id = newScopeId(contract.name, "two-subtasks");
  const scopes = [0, 1].map((subtaskIndex) => ({ id, caseId: "two-subtasks", subtaskIndex, parallelism: 2 }));
  const input = range(8 * R);
  const [zero, one] = scopes.map(
    (scope) =>
      new ContractSubtask(
        contract,
        scope,
        input.filter((index) => index % 2 === scope.subtaskIndex),
      ),
  ) as [ContractSubtask<IN, S>, ContractSubtask<IN, S>];
  const check = checksFor(contract, scopes, input);
  await withScopes(contract, scopes, async () => {
    await zero.start();
    await one.start();
    await zero.write(R);
    await one.write(R);
    // One global checkpoint: both snapshot, it is stored, then both are told.
    const first = await zero.snapshot();
    if ((await one.snapshot()) !== first) throw new Error("the subtasks' checkpoint ids diverged");
    zero.store(first);
    one.store(first);
    await zero.notifyComplete(first);
    await one.notifyComplete(first);
    await zero.write(R);
    await one.write(R);
    const second = await zero.snapshot();
    await one.snapshot();
    zero.store(second);
    one.store(second);
    await zero.notifyComplete(second);
    // Subtask 1 dies before its notification; subtask 0 goes on, then both restore (a failover restarts all).
    await one.write(R);
    await one.kill();
    await zero.write(R);
    await zero.kill();
    await zero.start({ restore: second });
    await one.start({ restore: second });
    await zero.finish(R);
    await one.finish(R);
    await check.all();
  });
}
