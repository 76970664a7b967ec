import { GeneratorSource } from "@onceflow/core";
import { describeSource } from "./describe-source.js";

// The source contract suite on core's GeneratorSource. Its input is a function of the index, not
// something written: `writeInput` keeps the suite's records per split, and `generate` hands them
// out (split k of S produces indices k, k + S, …, so index i is record ⌊i / S⌋ of split i mod S).

const written = new Map<string, string[][]>();

describeSource<string>({
  name: "GeneratorSource",
  setup: (scope) => {
    written.set(
      scope.id,
      Array.from({ length: scope.splits }, () => []),
    );
  },
  teardown: (scope) => {
    written.delete(scope.id);
  },
  writeInput: (scope, split, records) => {
    written.get(scope.id)?.[split]?.push(...records);
  },
  createSource: (scope) => {
    const splits = written.get(scope.id) ?? [];
    const perSplit = Math.max(...splits.map((records) => records.length));
    return new GeneratorSource<string>({
      count: perSplit * scope.splits,
      splits: scope.splits,
      batchSize: 2,
      generate: (index) =>
        splits[index % scope.splits]?.[Math.floor(index / scope.splits)] ?? `missing ${index}`,
    });
  },
  createRecord: (index) => `record-${index}`,
  identify: (record) => record,
  skip: {
    "idle-split-does-not-hold-back-others":
      "every split of a GeneratorSource produces records up to its count: it has no idle split",
  },
});
