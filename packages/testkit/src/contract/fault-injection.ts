import { type CommitErrorClassification, OnceflowError, type TwoPhaseCommitSink } from "@onceflow/core";

/**
 * The author-written steps of a {@link TwoPhaseCommitSink} that faults can be injected around.
 * `invoke` stands for whichever of `invoke`/`invokeBatch` the sink uses for a batch.
 *
 * @example
 * ```ts
 * const step: SinkStep = "preCommit";
 * ```
 */
export type SinkStep =
  | "beginTransaction"
  | "invoke"
  | "preCommit"
  | "commit"
  | "abort"
  | "recoverAndCommit"
  | "recoverAndAbort"
  | "finishRecoveringTransactions";

/**
 * What an injected fault does:
 *
 * - `throw`: the step throws a transient {@link InjectedFaultError}; a failing commit is retried
 *   with the sink's backoff (its `classifyCommitError` is bypassed and answers `retry`).
 * - `fatal`: the step throws an {@link InjectedFaultError} that the commit logic must not retry
 *   (`classifyCommitError` answers `fatal`): the attempt fails and the runtime restores.
 * - `kill`: a SIGKILL at this point. The step throws {@link SimulatedKillError} and the instance is
 *   dead from then on: every later step of it throws too, so no author code runs after the kill
 *   point. The caller abandons the instance (no `close`, no abort) and restores a new one.
 *
 * @example
 * ```ts
 * const fault: FaultKind = "kill";
 * ```
 */
export type FaultKind = "throw" | "fatal" | "kill";

/**
 * One fault: at the `call`-th call of `step` on this instance (1-based, default 1), `before` the
 * author's code runs or `after` it returned (its effects applied), do `fault`, `times` times in a
 * row (default 1).
 *
 * @example
 * ```ts
 * // The commit reaches the external system, then the acknowledgement is lost once.
 * const rule: FaultRule = { step: "commit", when: "after", fault: "throw" };
 * ```
 */
export interface FaultRule {
  readonly step: SinkStep;
  readonly when: "before" | "after";
  readonly fault: FaultKind;
  readonly call?: number;
  readonly times?: number;
}

/**
 * Thrown by a step with an injected `throw` or `fatal` fault. Code `USER_FUNCTION_FAILED`: it
 * stands for an error of the sink's own code or of the external system.
 *
 * @example
 * ```ts
 * if (error instanceof InjectedFaultError) console.log(error.step, error.when);
 * ```
 */
export class InjectedFaultError extends OnceflowError {
  readonly step: SinkStep;
  readonly when: "before" | "after";
  readonly retriable: boolean;

  constructor(step: SinkStep, when: "before" | "after", retriable: boolean) {
    super("USER_FUNCTION_FAILED", `injected fault ${when} ${step}${retriable ? " (transient)" : ""}`, {
      details: { step, when, retriable },
    });
    this.step = step;
    this.when = when;
    this.retriable = retriable;
  }
}

/**
 * Thrown by every step of a sink instance once a `kill` fault hit it: the process is gone.
 *
 * @example
 * ```ts
 * await harness.notifyComplete(3).catch((error) => { if (!isSimulatedKill(error)) throw error; });
 * ```
 */
export class SimulatedKillError extends OnceflowError {
  constructor(step: SinkStep, when: "before" | "after") {
    super("USER_FUNCTION_FAILED", `simulated SIGKILL ${when} ${step}: this sink instance is dead`, {
      details: { step, when },
    });
  }
}

/**
 * Whether `error` is, or was caused by, a simulated kill (the base class wraps commit errors).
 *
 * @example
 * ```ts
 * expect(isSimulatedKill(await harness.snapshot(2).catch((e) => e))).toBe(true);
 * ```
 */
export function isSimulatedKill(error: unknown): boolean {
  for (let cause: unknown = error, depth = 0; cause !== undefined && depth < 8; depth++) {
    if (cause instanceof SimulatedKillError) return true;
    cause = (cause as { cause?: unknown } | null)?.cause;
  }
  return false;
}

/**
 * Control over a sink instance wrapped by {@link injectFaults}.
 *
 * @example
 * ```ts
 * const faults = injectFaults(sink, [{ step: "commit", when: "after", fault: "kill" }]);
 * faults.killed; // true once the kill point was reached
 * ```
 */
export interface InjectedFaults {
  /** True once a `kill` fault fired: the instance must be abandoned. */
  readonly killed: boolean;
  /** How often each step was called so far. */
  readonly calls: Readonly<Record<SinkStep, number>>;
  /** Adds rules (call numbers count from the calls made so far). */
  add(...rules: FaultRule[]): void;
  /** Kills the instance now, between steps: every later step throws {@link SimulatedKillError}. */
  kill(): void;
}

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Which author step of a sink threw an error, and on which transaction: what a contract failure
 * names ("preCommit of transaction … for checkpoint 3 threw …").
 *
 * @example
 * ```ts
 * const failed: FailedSinkStep = { step: "preCommit", transaction: "gid 'x'", checkpointId: 3 };
 * ```
 */
export interface FailedSinkStep {
  readonly step: SinkStep;
  /** `describeTransaction` of the step's transaction, when the step has one. */
  readonly transaction: string | undefined;
  /** The checkpoint the transaction is pre-committed (or being pre-committed) for, when known. */
  readonly checkpointId: number | undefined;
}

/** Errors thrown by wrapped author steps, with the step: the error itself is passed on unchanged. */
const failedSteps = new WeakMap<object, FailedSinkStep>();

/**
 * The author step that threw `error` or an error in its `cause` chain (the base class wraps commit
 * errors), when the sink was wrapped by {@link injectFaults}.
 *
 * @example
 * ```ts
 * const failed = failedStepOf(error); // { step: "commit", transaction: "…", checkpointId: 2 }
 * ```
 */
export function failedStepOf(error: unknown): FailedSinkStep | undefined {
  for (let cause: unknown = error, depth = 0; cause !== undefined && depth < 8; depth++) {
    if (typeof cause === "object" && cause !== null) {
      const failed = failedSteps.get(cause);
      if (failed !== undefined) return failed;
    }
    cause = (cause as { cause?: unknown } | null)?.cause;
  }
  return undefined;
}

/**
 * "preCommit of transaction <describeTransaction(txn)> for checkpoint 3": a failed step in words.
 *
 * @example
 * ```ts
 * describeFailedStep({ step: "abort", transaction: "t-1", checkpointId: undefined }); // "abort of transaction t-1"
 * ```
 */
export function describeFailedStep(failed: FailedSinkStep): string {
  const transaction = failed.transaction === undefined ? "" : ` of transaction ${failed.transaction}`;
  const checkpoint = failed.checkpointId === undefined ? "" : ` for checkpoint ${failed.checkpointId}`;
  return `${failed.step}${transaction}${checkpoint}`;
}

/** Steps whose first argument is the transaction. */
const transactionSteps: ReadonlySet<SinkStep> = new Set([
  "invoke",
  "preCommit",
  "commit",
  "abort",
  "recoverAndCommit",
  "recoverAndAbort",
]);

const steps: readonly SinkStep[] = [
  "beginTransaction",
  "invoke",
  "preCommit",
  "commit",
  "abort",
  "recoverAndCommit",
  "recoverAndAbort",
  "finishRecoveringTransactions",
];

/**
 * Injects faults into one {@link TwoPhaseCommitSink} instance without the author's help: the
 * author's protected steps are wrapped on the instance (an own property shadows the prototype's
 * method, and the base class calls them through `this`), so any subclass works as written. Also
 * wraps `classifyCommitError` so injected faults are retried (`throw`) or not (`fatal`, `kill`)
 * whatever the sink's own classification says; other errors still go to the sink's.
 *
 * Call it right after creating the instance, before `initializeState`.
 *
 * @example
 * ```ts
 * const sink = new FileSink<string>({ directory: "out" });
 * injectFaults(sink, [{ step: "preCommit", when: "before", fault: "fatal", call: 2 }]);
 * const harness = new SinkTestHarness(sink);
 * ```
 */
export function injectFaults<IN>(
  sink: TwoPhaseCommitSink<IN, unknown>,
  rules: readonly FaultRule[] = [],
): InjectedFaults {
  const target = sink as unknown as Record<string, unknown>;
  const calls = Object.fromEntries(steps.map((step) => [step, 0])) as Record<SinkStep, number>;
  const active: Array<{ rule: FaultRule; from: number; left: number }> = [];
  let killed: { step: SinkStep; when: "before" | "after" } | undefined;

  const add = (...more: FaultRule[]): void => {
    for (const rule of more) {
      active.push({ rule, from: calls[rule.step] + (rule.call ?? 1), left: rule.times ?? 1 });
    }
  };
  add(...rules);

  const fire = (step: SinkStep, when: "before" | "after", call: number): void => {
    if (killed !== undefined) throw new SimulatedKillError(killed.step, killed.when);
    for (const entry of active) {
      if (entry.rule.step !== step || entry.rule.when !== when) continue;
      if (entry.left <= 0 || call < entry.from) continue;
      entry.left -= 1;
      if (entry.rule.fault === "kill") {
        killed = { step, when };
        throw new SimulatedKillError(step, when);
      }
      throw new InjectedFaultError(step, when, entry.rule.fault === "throw");
    }
  };

  const describe = target.describeTransaction as AnyFunction | undefined;
  const noteFailure = (error: unknown, step: SinkStep, args: readonly unknown[]): void => {
    if (typeof error !== "object" || error === null || failedSteps.has(error)) return;
    // An injected fault of a step this one called (recoverAndAbort calls abort) is not the author's.
    if (error instanceof InjectedFaultError || error instanceof SimulatedKillError) return;
    let transaction: string | undefined;
    let checkpointId: number | undefined;
    if (transactionSteps.has(step)) {
      const txn = args[0];
      try {
        transaction = String(describe?.call(sink, txn) ?? txn);
      } catch {
        transaction = undefined;
      }
      checkpointId =
        step === "preCommit"
          ? (args[1] as { checkpointId?: number } | undefined)?.checkpointId
          : sink.pendingTransactions().find((pending) => pending.transaction === txn)?.checkpointId;
    }
    failedSteps.set(error, { step, transaction, checkpointId });
  };

  const wrap = (name: string, step: SinkStep): void => {
    const original = target[name];
    if (typeof original !== "function") return;
    const bound = (original as AnyFunction).bind(sink);
    target[name] = async (...args: unknown[]): Promise<unknown> => {
      calls[step] += 1;
      const call = calls[step];
      fire(step, "before", call);
      let result: unknown;
      try {
        result = await bound(...args);
      } catch (error) {
        // The author's own failure (injected faults come from fire): remember where it happened.
        noteFailure(error, step, args);
        throw error;
      }
      fire(step, "after", call);
      return result;
    };
  };

  for (const step of steps) if (step !== "invoke") wrap(step, step);
  // The base class uses invokeBatch when the sink has one, invoke otherwise: count either as "invoke".
  if (typeof target.invokeBatch === "function") wrap("invokeBatch", "invoke");
  else wrap("invoke", "invoke");

  const classify = target.classifyCommitError;
  if (typeof classify === "function") {
    const boundClassify = (classify as AnyFunction).bind(sink);
    target.classifyCommitError = (error: unknown, transaction: unknown) => {
      if (error instanceof SimulatedKillError) return "fatal" satisfies CommitErrorClassification;
      if (error instanceof InjectedFaultError) return error.retriable ? "retry" : "fatal";
      return boundClassify(error, transaction);
    };
  }

  return {
    get killed() {
      return killed !== undefined;
    },
    calls,
    add,
    kill: () => {
      killed ??= { step: "invoke", when: "after" };
    },
  };
}
