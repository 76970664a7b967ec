import type { SourceSplit } from "@onceflow/core";
import { describe, it } from "vitest";
import { sourceContractCases } from "./source-contract-cases.js";
import type { SourceContract } from "./source-contract-options.js";

/**
 * The source contract suite as a vitest `describe` block: one test per case of
 * {@link sourceContractCases}, each named after the rule it checks — every record once after a
 * restore from a checkpoint taken anywhere (right after split assignment, after every batch),
 * positions that never go back or skip, splits moved on rescale up and down, commit-back never
 * ahead of a completed checkpoint, idle splits that do not hold the others back, `close()` on every
 * path (with the `lingering` leak check), a bounded source that ends. A failure names the reader
 * method that broke the rule.
 *
 * The suite writes the input itself through `writeInput`, so the same contract runs on any source
 * with a way to append records to one of its splits: a Kafka partition, a stream, a file, a table.
 * Needs vitest (an optional peer dependency of `@onceflow/testkit`). Cases run one after another.
 *
 * @example
 * ```ts
 * // my-source.contract.test.ts
 * import { describeSource } from "@onceflow/testkit/vitest";
 *
 * describeSource<string>({
 *   name: "MySource",
 *   setup: (scope) => store.createStreams(scope.id, scope.splits),
 *   writeInput: (scope, split, records) => store.append(`${scope.id}-${split}`, records),
 *   createSource: (scope) => new MySource({ prefix: scope.id, streams: scope.splits }),
 *   createRecord: (index) => `record-${index}`,
 * });
 * ```
 */
export function describeSource<T, SplitT extends SourceSplit = SourceSplit>(
  contract: SourceContract<T, SplitT>,
): void {
  const cases = sourceContractCases(contract);
  describe(`${contract.name} keeps the source contract`, () => {
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
