import type { Source, SourceBatch, SourceReader, SourceReaderContext, SourceSplit } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { ContractViolationError } from "./contract-run.js";
import { describeSource } from "./describe-source.js";
import { type SourceContractCase, sourceContractCases } from "./source-contract-cases.js";
import type { SourceContract } from "./source-contract-options.js";

// The source contract suite must catch broken sources. An in-memory "log" with numbered splits
// (it outlives readers, as a broker outlives a killed process), with committed positions and open
// connections, a correct source on it that passes every case (bounded and continuous), and sources
// with one classic bug each: their cases are run directly and the ones the bug must break are
// asserted to fail with a ContractViolationError.

interface Log {
  readonly splits: string[][];
  readonly committed: number[];
  readonly connections: Set<string>;
  readonly listeners: Set<() => void>;
}

const logs = new Map<string, Log>();
let connectionNumber = 0;

function logOf(name: string, splits = 0): Log {
  let log = logs.get(name);
  if (log === undefined) {
    log = {
      splits: Array.from({ length: splits }, () => []),
      committed: new Array<number>(splits).fill(0),
      connections: new Set(),
      listeners: new Set(),
    };
    logs.set(name, log);
  }
  return log;
}

interface LogSplit extends SourceSplit {
  readonly index: number;
  readonly position: number;
}

interface MutableSplit {
  readonly splitId: string;
  readonly index: number;
  position: number;
}

/** A correct reader: small batches, positions per split, commit-back on completion only. */
class LogReader implements SourceReader<string, LogSplit> {
  protected readonly splits: MutableSplit[] = [];
  protected readonly pending = new Map<number, number[]>();
  protected readonly connection = `connection-${++connectionNumber}`;
  protected cursor = 0;
  protected closed = false;
  private wake: (() => void) | undefined;

  constructor(
    protected readonly log: Log,
    protected readonly bounded: boolean,
    protected readonly context: SourceReaderContext,
  ) {
    log.connections.add(this.connection);
  }

  addSplits(splits: LogSplit[]): void {
    for (const split of splits) this.splits.push({ ...split });
  }

  pollNext(): SourceBatch<string> | undefined {
    for (let tried = 0; tried < this.splits.length; tried++) {
      const split = this.splits[this.cursor];
      this.cursor = (this.cursor + 1) % this.splits.length;
      if (split === undefined) continue;
      const batch = this.read(split, 2);
      if (batch !== undefined) return batch;
    }
    return undefined;
  }

  protected read(split: MutableSplit, count: number): SourceBatch<string> | undefined {
    const records = (this.log.splits[split.index] ?? []).slice(split.position, split.position + count);
    if (records.length === 0) return undefined;
    split.position += records.length;
    return { splitId: split.splitId, records };
  }

  isAvailable(): Promise<void> {
    if (this.closed || this.isFinished() || this.hasData()) return Promise.resolve();
    return new Promise((resolve) => {
      const listener = () => {
        this.log.listeners.delete(listener);
        this.wake = undefined;
        resolve();
      };
      this.wake = listener;
      this.log.listeners.add(listener);
    });
  }

  isFinished(): boolean {
    return this.bounded && !this.hasData();
  }

  snapshotState(checkpointId: number): LogSplit[] {
    this.pending.set(
      checkpointId,
      this.splits.map((split) => split.position),
    );
    return this.splits.map(({ splitId, index, position }) => ({ splitId, index, position }));
  }

  notifyCheckpointComplete(checkpointId: number): void {
    const positions = this.pending.get(checkpointId);
    if (positions !== undefined) this.commit(positions);
    for (const id of this.pending.keys()) if (id <= checkpointId) this.pending.delete(id);
  }

  notifyCheckpointAborted(checkpointId: number): void {
    this.pending.delete(checkpointId);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.log.connections.delete(this.connection);
    this.wake?.();
  }

  protected commit(positions: readonly number[]): void {
    this.splits.forEach((split, at) => {
      this.log.committed[split.index] = positions[at] ?? 0;
    });
  }

  protected hasData(): boolean {
    return this.splits.some((split) => (this.log.splits[split.index]?.length ?? 0) > split.position);
  }
}

/** Bug: snapshotState stores the position one record ahead — a restore skips a record. */
class SkipsOnRestoreReader extends LogReader {
  override snapshotState(checkpointId: number): LogSplit[] {
    return super.snapshotState(checkpointId).map((split) => ({ ...split, position: split.position + 1 }));
  }
}

/** Bug: prefetches 4 records, hands out 2, and snapshots the fetch position instead of the handed-out one. */
class SnapshotsFetchPositionReader extends LogReader {
  private readonly fetched = new Map<string, number>();
  private readonly buffered = new Map<string, string[]>();

  protected override read(split: MutableSplit, count: number): SourceBatch<string> | undefined {
    let buffer = this.buffered.get(split.splitId) ?? [];
    if (buffer.length === 0) {
      const from = this.fetched.get(split.splitId) ?? split.position;
      buffer = (this.log.splits[split.index] ?? []).slice(from, from + 2 * count);
      this.fetched.set(split.splitId, from + buffer.length);
    }
    const records = buffer.slice(0, count);
    this.buffered.set(split.splitId, buffer.slice(count));
    if (records.length === 0) return undefined;
    split.position += records.length;
    return { splitId: split.splitId, records };
  }

  override snapshotState(checkpointId: number): LogSplit[] {
    return super
      .snapshotState(checkpointId)
      .map((split) => ({ ...split, position: this.fetched.get(split.splitId) ?? split.position }));
  }
}

/** Bug: snapshotState leaves out the splits that have nothing left to read. */
class DropsFinishedSplitsReader extends LogReader {
  override snapshotState(checkpointId: number): LogSplit[] {
    return super
      .snapshotState(checkpointId)
      .filter((split) => split.position < (this.log.splits[split.index]?.length ?? 0));
  }
}

/** Bug: commits positions back at snapshotState, before the checkpoint completed. */
class CommitsOnSnapshotReader extends LogReader {
  override snapshotState(checkpointId: number): LogSplit[] {
    const splits = super.snapshotState(checkpointId);
    this.commit(splits.map((split) => split.position));
    return splits;
  }
}

/** Bug: commits what it handed out (auto-commit), whatever the checkpoints say. */
class CommitsOnPollReader extends LogReader {
  override pollNext(): SourceBatch<string> | undefined {
    const batch = super.pollNext();
    this.commit(this.splits.map((split) => split.position));
    return batch;
  }
}

/** Bug: reads the splits strictly in turn and waits on the current one, so an idle split blocks all. */
class BlocksOnIdleSplitReader extends LogReader {
  override pollNext(): SourceBatch<string> | undefined {
    const split = this.splits[this.cursor];
    if (split === undefined) return undefined;
    const batch = this.read(split, 2);
    // Moves on only after a batch: an empty split stops the reader until it gets records.
    if (batch !== undefined) this.cursor = (this.cursor + 1) % this.splits.length;
    return batch;
  }
}

/** Bug: close() forgets to release its connection. */
class LeaksConnectionReader extends LogReader {
  override async close(): Promise<void> {
    this.closed = true;
  }
}

/** Bug: close() releases the connection but leaves a waiting isAvailable() pending forever. */
class LeavesWaiterPendingReader extends LogReader {
  override async close(): Promise<void> {
    this.closed = true;
    this.log.connections.delete(this.connection);
  }
}

/** Bug: a bounded reader that never says it finished. */
class NeverFinishesReader extends LogReader {
  override isFinished(): boolean {
    return false;
  }
}

/** Bug: a restored split starts at the committed position, not the one its checkpoint holds. */
class ResumesFromCommittedReader extends LogReader {
  override addSplits(splits: LogSplit[]): void {
    for (const split of splits)
      this.splits.push({ ...split, position: this.log.committed[split.index] ?? 0 });
  }
}

type ReaderClass = new (log: Log, bounded: boolean, context: SourceReaderContext) => LogReader;

class LogSource implements Source<string, LogSplit> {
  readonly name = "log";

  constructor(
    private readonly logName: string,
    private readonly splitCount: number,
    readonly boundedness: "bounded" | "continuous",
    private readonly Reader: ReaderClass,
  ) {}

  async discoverSplits(): Promise<LogSplit[]> {
    return Array.from({ length: this.splitCount }, (_, index) => ({
      splitId: `log-${index}`,
      index,
      position: 0,
    }));
  }

  createReader(context: SourceReaderContext): LogReader {
    return new this.Reader(logOf(this.logName), this.boundedness === "bounded", context);
  }
}

function contractOf(
  name: string,
  Reader: ReaderClass,
  boundedness: "bounded" | "continuous",
): SourceContract<string, LogSplit> {
  return {
    name,
    setup: (scope) => {
      logOf(scope.id, scope.splits);
    },
    teardown: (scope) => {
      logs.delete(scope.id);
    },
    writeInput: (scope, split, records) => {
      const log = logOf(scope.id);
      log.splits[split]?.push(...records);
      for (const listener of [...log.listeners]) listener();
    },
    createSource: (scope) => new LogSource(scope.id, scope.splits, boundedness, Reader),
    createRecord: (index) => `r${index}`,
    committedPositions: (scope) => logOf(scope.id).committed,
    lingering: (scope) => [...logOf(scope.id).connections],
    // The in-memory log has every record at once: a few empty polls in a row means stuck.
    maxEmptyPolls: 50,
  };
}

describeSource(contractOf("LogSource (continuous)", LogReader, "continuous"));
describeSource(contractOf("LogSource (bounded)", LogReader, "bounded"));

const broken: {
  reader: ReaderClass;
  boundedness: "bounded" | "continuous";
  mustFail: string[];
}[] = [
  {
    reader: SkipsOnRestoreReader,
    boundedness: "continuous",
    mustFail: [
      "restore-after-split-assignment",
      "restore-from-every-checkpoint",
      "rescale-up",
      "rescale-down",
    ],
  },
  {
    reader: SnapshotsFetchPositionReader,
    boundedness: "continuous",
    mustFail: ["restore-from-every-checkpoint", "restore-same-checkpoint-twice"],
  },
  {
    reader: DropsFinishedSplitsReader,
    boundedness: "bounded",
    mustFail: ["restore-from-every-checkpoint"],
  },
  {
    reader: CommitsOnSnapshotReader,
    boundedness: "continuous",
    mustFail: ["commit-back-after-completed-checkpoint"],
  },
  {
    reader: CommitsOnPollReader,
    boundedness: "continuous",
    mustFail: ["commit-back-after-completed-checkpoint"],
  },
  {
    reader: BlocksOnIdleSplitReader,
    boundedness: "continuous",
    mustFail: ["idle-split-does-not-hold-back-others"],
  },
  {
    reader: LeaksConnectionReader,
    boundedness: "continuous",
    mustFail: ["close-before-splits", "close-on-every-path", "reads-every-record-once"],
  },
  {
    reader: LeavesWaiterPendingReader,
    boundedness: "continuous",
    mustFail: ["close-on-every-path"],
  },
  {
    reader: NeverFinishesReader,
    boundedness: "bounded",
    mustFail: ["bounded-source-ends", "reads-every-record-once"],
  },
  {
    reader: ResumesFromCommittedReader,
    boundedness: "continuous",
    mustFail: ["restore-from-every-checkpoint", "rescale-up", "rescale-down"],
  },
];

async function outcomeOf(testCase: SourceContractCase): Promise<unknown> {
  return testCase.run().then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("the source contract suite catches broken sources", () => {
  for (const { reader, boundedness, mustFail } of broken) {
    it(`${reader.name}: the cases its bug breaks fail with a ContractViolationError`, async () => {
      const cases = sourceContractCases(contractOf(reader.name, reader, boundedness));
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

  it("names the method and the rule: a restore that skips a record", async () => {
    const testCase = sourceContractCases(
      contractOf("SkipsOnRestore", SkipsOnRestoreReader, "continuous"),
    ).find((each) => each.id === "restore-after-split-assignment");
    const error = await outcomeOf(testCase!);
    expect(error).toBeInstanceOf(ContractViolationError);
    expect((error as ContractViolationError).message).toMatch(
      /^SkipsOnRestore: restore-after-split-assignment: pollNext of subtask \d skipped records of split 'log-\d'/,
    );
    expect((error as ContractViolationError).details).toMatchObject({ method: "pollNext" });
  });

  it("names the method and the rule: a commit-back ahead of the completed checkpoint", async () => {
    const testCase = sourceContractCases(
      contractOf("CommitsOnSnapshot", CommitsOnSnapshotReader, "continuous"),
    ).find((each) => each.id === "commit-back-after-completed-checkpoint");
    const error = await outcomeOf(testCase!);
    expect((error as ContractViolationError).details).toMatchObject({ method: "snapshotState" });
    expect((error as ContractViolationError).message).toMatch(
      /^CommitsOnSnapshot: commit-back-after-completed-checkpoint: commit-back after snapshotState\(1\): the source committed \d+ records of split 'log-\d' back/,
    );
  });

  it("names what close left open", async () => {
    const testCase = sourceContractCases(
      contractOf("LeaksConnection", LeaksConnectionReader, "continuous"),
    ).find((each) => each.id === "close-before-splits");
    const error = await outcomeOf(testCase!);
    expect((error as ContractViolationError).message).toMatch(
      /^LeaksConnection: close-before-splits: close left resources open after every reader was closed: connection-\d+/,
    );
  });
});
