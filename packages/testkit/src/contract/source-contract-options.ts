import type { Source, SourceSplit } from "@onceflow/core";

/**
 * What one case of the source contract suite runs against: input of its own. Name the topic,
 * stream or directory of the case after `id`, so cases never see each other's input.
 *
 * @example
 * ```ts
 * const topicOf = (scope: SourceContractScope) => `contract-${scope.id}`;
 * ```
 */
export interface SourceContractScope {
  /** Unique per case and run: lowercase letters, digits and `_`, starting with a letter (fits topic, stream and file names). */
  readonly id: string;
  /** The case's stable id, e.g. `restore-from-every-checkpoint`. */
  readonly caseId: string;
  /** How many splits the source must list for this case: `writeInput` writes to splits `0 … splits − 1`. */
  readonly splits: number;
}

/**
 * How to run the source contract suite on a source: `describeSource` (`@onceflow/testkit/vitest`)
 * and {@link sourceContractCases} take it. The suite writes the input itself, through
 * `writeInput`, and reads it back through the source's readers the way the runtime drives them.
 *
 * @example
 * ```ts
 * const contract: SourceContract<string, FileLinesSplit> = {
 *   name: "FileLinesSource",
 *   writeInput: (scope, split, records) =>
 *     appendFile(join(root, scope.id, `part-${split}.txt`), records.map((line) => `${line}\n`).join("")),
 *   createSource: (scope) => new FileLinesSource({ directory: join(root, scope.id) }),
 *   createRecord: (index) => `line-${index}`,
 * };
 * ```
 */
export interface SourceContract<T, SplitT extends SourceSplit = SourceSplit> {
  /** Names the `describe` block and the errors. */
  readonly name: string;
  /**
   * A new source over the case's input, with exactly `scope.splits` splits. Called once per case
   * (and again after a simulated restart): it must list the same splits each time.
   */
  createSource(scope: SourceContractScope): Source<T, SplitT> | Promise<Source<T, SplitT>>;
  /**
   * Appends `records` to split number `split` (`0 … scope.splits − 1`) of the case's input, in this
   * order — a Kafka partition, a Redis stream, a file. A bounded source gets all of its input
   * before its first `createSource`; a continuous one also while its readers run.
   */
  writeInput(scope: SourceContractScope, split: number, records: readonly T[]): Promise<void> | void;
  /** The `index`-th input record (unique per index). */
  createRecord(index: number): T;
  /** How read records are compared with the input (default: `JSON.stringify`). */
  identify?(value: T): string;
  /** Creates the case's input (topic with `scope.splits` partitions, directory) before anything else. */
  setup?(scope: SourceContractScope): Promise<void> | void;
  /** Removes the case's input after it (also when it failed). */
  teardown?(scope: SourceContractScope): Promise<void> | void;
  /**
   * For a source that commits its positions back to the external system (Kafka consumer-group
   * offsets, an acknowledged stream id, a replication slot's flushed position): how many records of
   * each split (index = split number) the external system counts as consumed right now. The suite
   * checks, after every step, that this is never ahead of the last completed checkpoint. Leave out
   * when the source commits nothing back.
   */
  committedPositions?(scope: SourceContractScope): Promise<readonly number[]> | readonly number[];
  /**
   * Lists the resources readers left open once every reader of the case was closed — connections,
   * consumers, file handles, timers — one readable name each. Called after each case's last step
   * (before `teardown`): the case fails, naming them, unless the list is empty. Without it, leaks
   * go unnoticed.
   */
  lingering?(scope: SourceContractScope): Promise<readonly string[]> | readonly string[];
  /** Splits per case (default 4; cases that rescale need at least 3). */
  readonly splits?: number;
  /** Records written to each split (default 6). */
  readonly recordsPerSplit?: number;
  /**
   * How many times in a row the readers may have nothing to hand out (each followed by a short
   * pause and `isAvailable`) before a case gives up on a record it wrote (default 2000). Raise it
   * for a source whose data takes long to show up after it was written.
   */
  readonly maxEmptyPolls?: number;
  /** Cases not to run, with the reason (shown as skipped). Prefer fixing the source. */
  readonly skip?: Readonly<Record<string, string>>;
  /** Time limit of each case in ms (default 60 000). */
  readonly timeout?: number;
}
