import type { TwoPhaseCommitSink } from "@onceflow/core";
import { describe, it } from "vitest";
import { twoPhaseCommitSinkContractCases } from "./contract-cases.js";
import type { TwoPhaseCommitSinkContract } from "./contract-options.js";

/**
 * The two-phase-commit sink contract suite as a vitest `describe` block: one test per case of
 * {@link twoPhaseCommitSinkContractCases} — every lifecycle step with a failure injected (a throw in
 * invoke, preCommit, commit and recoverAndCommit; a simulated kill between each pair of steps),
 * notifications repeated, out of order and aborted, the same checkpoint restored twice, an older
 * checkpoint restored, empty transactions, a commit that succeeds only on retry, two subtasks —
 * each ending with a check that the committed output is exactly the input.
 *
 * Faults are injected by wrapping the sink instance's protected steps ({@link injectFaults}), so
 * the sink needs no test hooks. A kill abandons the instance without `close()` (nothing after the
 * kill point runs) and restores a new one from the last stored checkpoint; give `kill` when an
 * abandoned instance would hold a lock the next one waits for. Real SIGKILLs of processes are the
 * crash and chaos suites' job.
 *
 * Needs vitest (an optional peer dependency of `@onceflow/testkit`). Cases run one after another.
 *
 * @example
 * ```ts
 * // my-sink.contract.test.ts
 * import { describeTwoPhaseCommitSink } from "@onceflow/testkit";
 *
 * describeTwoPhaseCommitSink<string>({
 *   name: "MySink",
 *   setup: (scope) => store.createBucket(scope.id),
 *   createSink: (scope) => new MySink({ bucket: scope.id }),
 *   readCommitted: (scope) => store.readAll(scope.id),
 *   createRecord: (index) => `record-${index}`,
 * });
 * ```
 */
export function describeTwoPhaseCommitSink<
  IN,
  S extends TwoPhaseCommitSink<IN, unknown> = TwoPhaseCommitSink<IN, unknown>,
>(contract: TwoPhaseCommitSinkContract<IN, S>): void {
  const cases = twoPhaseCommitSinkContractCases(contract);
  describe(`${contract.name} keeps the two-phase-commit sink contract`, () => {
    for (const testCase of cases) {
      const title = `${testCase.id}: ${testCase.title}`;
      if (testCase.skipReason !== undefined) {
        it.skip(`${title} (skipped: ${testCase.skipReason})`, () => {});
        continue;
      }
      it(title, { timeout: contract.timeout ?? 60_000 }, () => testCase.run());
    }
  });
}
