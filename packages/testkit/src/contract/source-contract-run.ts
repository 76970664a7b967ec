import {
  defaultSerializerFor,
  noopMetrics,
  type SourceReader,
  type SourceSplit,
  silentLogger,
  type TypeSerializer,
} from "@onceflow/core";
import { ContractViolationError } from "./contract-run.js";
import type { SourceContract, SourceContractScope } from "./source-contract-options.js";

/** Where the suite wrote a record: its split number and its position in that split. */
interface WrittenAt {
  readonly split: number;
  readonly position: number;
}

interface StoredSourceCheckpoint {
  /** Every reader's splits, serialized as the runtime stores them. */
  readonly splits: readonly Buffer[];
  /** Records handed out per split number at the barrier. */
  readonly emitted: readonly number[];
  /** The output the barrier covered (of its own timeline: restores cut the output back). */
  readonly output: readonly string[];
}

interface RunningReader<T, SplitT extends SourceSplit> {
  readonly subtaskIndex: number;
  readonly reader: SourceReader<T, SplitT>;
  readonly splitIds: Set<string>;
  closed: boolean;
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const DEFAULT_MAX_EMPTY_POLLS = 2000;

/**
 * One job reading the contract's source, as the suite models it: readers created and assigned
 * splits like the runtime does (restored splits first, each split to the subtask `assignSplit`
 * names), polled from one loop, checkpointed between polls, notified, closed. Every batch is
 * checked on the spot: each record must be the next one of its split — never one handed out
 * already since the restore, never one after a gap. The output is what a downstream operator saw
 * in the current timeline: a restore cuts it back to the restored checkpoint.
 */
export class SourceContractRun<T, SplitT extends SourceSplit> {
  private readonly identify: (value: T) => string;
  private readonly written = new Map<string, WrittenAt>();
  private readonly writtenPerSplit: number[];
  private readonly splitNumberOf = new Map<string, number>();
  private readonly checkpoints = new Map<number, StoredSourceCheckpoint>();
  private readonly completedEmitted: number[];
  private readers: RunningReader<T, SplitT>[] = [];
  private serializer: TypeSerializer<SplitT> | undefined;
  private sourceBoundedness: "bounded" | "continuous" | undefined;
  private emitted: number[];
  private output: string[] = [];
  private nextRecord = 0;
  private lastCheckpointId = 0;
  /** Everything ever created, so that the case can close what a failure left open. */
  private readonly everyReader: RunningReader<T, SplitT>[] = [];

  constructor(
    private readonly contract: SourceContract<T, SplitT>,
    readonly scope: SourceContractScope,
  ) {
    this.identify = contract.identify ?? ((value: T) => JSON.stringify(value));
    this.writtenPerSplit = new Array<number>(scope.splits).fill(0);
    this.emitted = new Array<number>(scope.splits).fill(0);
    this.completedEmitted = new Array<number>(scope.splits).fill(0);
  }

  /** Records the readers handed out in the current timeline, by split number. */
  get handedOut(): readonly number[] {
    return this.emitted;
  }

  /** The boundedness of the source the last `start` created. */
  get boundedness(): "bounded" | "continuous" {
    if (this.sourceBoundedness === undefined) throw new Error("no source was created yet: start() first");
    return this.sourceBoundedness;
  }

  /** The number of readers running now. */
  get parallelism(): number {
    return this.readers.length;
  }

  /** Appends `count` new records to split number `split`. */
  async write(split: number, count: number): Promise<void> {
    const records: T[] = [];
    for (let n = 0; n < count; n++) {
      const record = this.contract.createRecord(this.nextRecord++);
      const key = this.identify(record);
      if (this.written.has(key)) throw new Error(`createRecord gave the same record twice: ${key}`);
      this.written.set(key, { split, position: this.writtenPerSplit[split]! + n });
      records.push(record);
    }
    await this.contract.writeInput(this.scope, split, records);
    this.writtenPerSplit[split]! += count;
  }

  /** Appends `count` new records to every split. */
  async writeEverySplit(count: number): Promise<void> {
    for (let split = 0; split < this.scope.splits; split++) await this.write(split, count);
  }

  /**
   * Starts `parallelism` readers on a new source instance, fresh or restored from a stored
   * checkpoint. Readers still running are closed first, as a failover cancels its tasks.
   */
  async start(parallelism: number, restore?: number): Promise<void> {
    await this.closeReaders();
    const restored = restore === undefined ? undefined : this.checkpoints.get(restore);
    if (restore !== undefined && restored === undefined)
      throw new Error(`checkpoint ${restore} was never stored`);
    const source = await this.contract.createSource(this.scope);
    this.serializer = source.splitSerializer ?? defaultSerializerFor<SplitT>();
    this.sourceBoundedness = source.boundedness;
    const jobId = `contract-${this.scope.id}`;
    const discovered = await source.discoverSplits({ jobId, parallelism, logger: silentLogger });
    this.checkDiscovered(discovered);
    const splits = restored === undefined ? [...discovered] : this.restoredSplits(restored, discovered);
    if (restored === undefined) {
      this.emitted = new Array<number>(this.scope.splits).fill(0);
      this.output = [];
    } else {
      this.emitted = [...restored.emitted];
      this.output = [...restored.output];
    }
    const assigned: SplitT[][] = Array.from({ length: parallelism }, () => []);
    splits.forEach((split, index) => {
      const owner = source.assignSplit?.(split, parallelism) ?? index % parallelism;
      const list = assigned[owner];
      if (list === undefined || !Number.isInteger(owner)) {
        throw this.violation(
          "assignSplit",
          `assigned split '${split.splitId}' to subtask ${owner}, but the parallelism is ${parallelism}: return 0 … parallelism − 1`,
        );
      }
      list.push(split);
    });
    for (let subtaskIndex = 0; subtaskIndex < parallelism; subtaskIndex++) {
      const reader = await source.createReader({
        jobId,
        operatorUid: "source",
        subtaskIndex,
        parallelism,
        isRestored: restored !== undefined,
        checkpointingInterval: 1000,
        logger: silentLogger,
        metrics: noopMetrics,
      });
      const own = assigned[subtaskIndex] ?? [];
      const running = {
        subtaskIndex,
        reader,
        splitIds: new Set(own.map((split) => split.splitId)),
        closed: false,
      };
      this.readers.push(running);
      this.everyReader.push(running);
      await reader.addSplits(own);
      await reader.start?.();
    }
  }

  /** Polls every reader once. Returns how many records they handed out. */
  async pollRound(): Promise<number> {
    let count = 0;
    for (const running of this.readers) count += await this.poll(running);
    return count;
  }

  /**
   * Polls until `done()` holds, waiting on `isAvailable` between empty rounds. Fails, naming
   * `waitingFor`, after `maxEmptyPolls` empty rounds in a row.
   */
  async readUntil(done: () => boolean, waitingFor: string): Promise<void> {
    const limit = this.contract.maxEmptyPolls ?? DEFAULT_MAX_EMPTY_POLLS;
    let empty = 0;
    while (!done()) {
      if ((await this.pollRound()) > 0) {
        empty = 0;
        continue;
      }
      if (done()) return;
      if (++empty > limit) {
        throw this.violation(
          "pollNext",
          `handed out nothing in ${limit} polls in a row (each after isAvailable resolved or a short pause) while waiting for ${waitingFor}; handed out per split: [${this.emitted.join(", ")}] of [${this.writtenPerSplit.join(", ")}] written; isFinished() per reader: [${this.readers.map((running) => running.reader.isFinished()).join(", ")}]`,
        );
      }
      await this.waitForData();
    }
  }

  /**
   * Waits until a reader that has not finished says it may have data, or a short pause passed; then
   * yields to the event loop, so that I/O callbacks run even when `isAvailable` resolves at once.
   */
  private async waitForData(): Promise<void> {
    const unfinished = this.readers.filter((running) => !running.reader.isFinished());
    await Promise.race([pause(5), ...unfinished.map((running) => running.reader.isAvailable())]);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Reads until a batch with records arrives (any reader). */
  async readOneBatch(): Promise<void> {
    const limit = this.contract.maxEmptyPolls ?? DEFAULT_MAX_EMPTY_POLLS;
    for (let empty = 0; empty <= limit; empty++) {
      for (const running of this.readers) if ((await this.poll(running)) > 0) return;
      await this.waitForData();
    }
    throw this.violation(
      "pollNext",
      `handed out nothing in ${limit} polls in a row while records were left to read`,
    );
  }

  /** Reads until every record written so far was handed out. */
  async readEverythingWritten(): Promise<void> {
    await this.readUntil(() => this.allHandedOut(), "every record written so far");
  }

  /** True when every written record was handed out in the current timeline. */
  allHandedOut(): boolean {
    return this.emitted.every((count, split) => count >= (this.writtenPerSplit[split] ?? 0));
  }

  /** True when the records written to `split` were all handed out. */
  splitHandedOut(split: number): boolean {
    return (this.emitted[split] ?? 0) >= (this.writtenPerSplit[split] ?? 0);
  }

  /** A checkpoint barrier: every reader's `snapshotState`, stored as the runtime stores it. Returns the id. */
  async checkpoint(): Promise<number> {
    const checkpointId = ++this.lastCheckpointId;
    const serializer = this.serializer!;
    const splits: Buffer[] = [];
    for (const running of this.readers) {
      const snapshot = running.reader.snapshotState(checkpointId);
      const ids = snapshot.map((split) => split.splitId);
      const missing = [...running.splitIds].filter((id) => !ids.includes(id));
      if (missing.length > 0) {
        throw this.violation(
          "snapshotState",
          `of subtask ${running.subtaskIndex} left out split(s) ${missing.join(", ")} assigned to it (finished or not): a restore would read them again from their start, or lose them — return every assigned split with its position`,
        );
      }
      const foreign = ids.filter((id) => !running.splitIds.has(id));
      if (foreign.length > 0 || new Set(ids).size !== ids.length) {
        throw this.violation(
          "snapshotState",
          `of subtask ${running.subtaskIndex} returned split(s) [${ids.join(", ")}], but it was assigned [${[...running.splitIds].join(", ")}]: return each assigned split once`,
        );
      }
      for (const split of snapshot) splits.push(serializer.serialize(split));
    }
    this.checkpoints.set(checkpointId, {
      splits,
      emitted: [...this.emitted],
      output: [...this.output],
    });
    await this.checkCommitBack(`snapshotState(${checkpointId})`);
    return checkpointId;
  }

  /** Tells every reader that checkpoint `checkpointId` completed. */
  async complete(checkpointId: number): Promise<void> {
    const stored = this.checkpoints.get(checkpointId);
    if (stored !== undefined) {
      stored.emitted.forEach((count, split) => {
        if (count > (this.completedEmitted[split] ?? 0)) this.completedEmitted[split] = count;
      });
    }
    for (const running of this.readers) await running.reader.notifyCheckpointComplete?.(checkpointId);
    await this.checkCommitBack(`notifyCheckpointComplete(${checkpointId})`);
  }

  /** Tells every reader that checkpoint `checkpointId` was aborted. */
  async abort(checkpointId: number): Promise<void> {
    for (const running of this.readers) await running.reader.notifyCheckpointAborted?.(checkpointId);
    await this.checkCommitBack(`notifyCheckpointAborted(${checkpointId})`);
  }

  /** Fails when the external system counts more records as consumed than the last completed checkpoint covers. */
  async checkCommitBack(after: string): Promise<void> {
    if (this.contract.committedPositions === undefined) return;
    const committed = await this.contract.committedPositions(this.scope);
    committed.forEach((count, split) => {
      const allowed = this.completedEmitted[split] ?? 0;
      if (count > allowed) {
        throw new ContractViolationError(
          `${this.contract.name}: ${this.scope.caseId}: commit-back after ${after}: the source committed ${count} records of split ${this.splitNameOf(split)} back to the external system, but the completed checkpoints cover only ${allowed}: commit positions back only in notifyCheckpointComplete, and only the positions that checkpoint's snapshotState returned`,
          {
            caseId: this.scope.caseId,
            method: after.replace(/\(.*$/, ""),
            committed: count,
            completed: allowed,
          },
        );
      }
    });
  }

  /** Closes every running reader (each once). */
  async closeReaders(): Promise<void> {
    const readers = this.readers;
    this.readers = [];
    for (const running of readers) await this.closeReader(running);
  }

  /** Closes whatever a failed case left open, ignoring errors. */
  async closeEverything(): Promise<void> {
    for (const running of this.everyReader) await this.closeReader(running).catch(() => {});
    this.readers = [];
  }

  /** The running readers (for cases that drive one directly). */
  runningReaders(): readonly SourceReader<T, SplitT>[] {
    return this.readers.map((running) => running.reader);
  }

  /** Fails unless the current timeline's output is the whole input, each record once. */
  expectEveryRecordOnce(when: string): void {
    const seen = new Map<string, number>();
    for (const key of this.output) seen.set(key, (seen.get(key) ?? 0) + 1);
    const missing = [...this.written.keys()].filter((key) => !seen.has(key));
    const duplicated = [...seen].filter(([, count]) => count > 1).map(([key, count]) => `${key} ×${count}`);
    if (missing.length + duplicated.length === 0) return;
    const list = (items: string[]) =>
      items.length > 8 ? `${items.slice(0, 8).join(", ")} … (${items.length})` : items.join(", ");
    throw new ContractViolationError(
      `${this.contract.name}: ${this.scope.caseId}: ${when}: the records read are not the input once each: ${[
        missing.length > 0 ? `missing ${list(missing)}` : undefined,
        duplicated.length > 0 ? `duplicated ${list(duplicated)}` : undefined,
      ]
        .filter((part) => part !== undefined)
        .join("; ")}`,
      { caseId: this.scope.caseId, missing, duplicated },
    );
  }

  /** A contract violation naming the method and the case. */
  violation(method: string, message: string): ContractViolationError {
    return new ContractViolationError(`${this.contract.name}: ${this.scope.caseId}: ${method} ${message}`, {
      caseId: this.scope.caseId,
      method,
    });
  }

  private async closeReader(running: RunningReader<T, SplitT>): Promise<void> {
    if (running.closed) return;
    running.closed = true;
    await running.reader.close();
  }

  private async poll(running: RunningReader<T, SplitT>): Promise<number> {
    const batch = await running.reader.pollNext();
    if (batch === undefined || batch.records.length === 0) return 0;
    const who = `of subtask ${running.subtaskIndex}`;
    if (!running.splitIds.has(batch.splitId)) {
      throw this.violation(
        "pollNext",
        `${who} returned a batch of split '${batch.splitId}', which is not assigned to it (assigned: ${[...running.splitIds].join(", ") || "none"})`,
      );
    }
    if (batch.timestamps !== undefined && batch.timestamps.length !== batch.records.length) {
      throw this.violation(
        "pollNext",
        `${who} returned ${batch.records.length} records but ${batch.timestamps.length} timestamps for split '${batch.splitId}'`,
      );
    }
    for (const record of batch.records) {
      const key = this.identify(record);
      const at = this.written.get(key);
      if (at === undefined)
        throw this.violation("pollNext", `${who} returned a record that was never written: ${key}`);
      this.checkSplitOf(batch.splitId, at.split, who);
      const expected = this.emitted[at.split] ?? 0;
      if (at.position > expected) {
        throw this.violation(
          "pollNext",
          `${who} skipped records of split '${batch.splitId}': it handed out position ${at.position} (${key}) when position ${expected} was next — a position must move forward one record at a time, and a restore must continue exactly where the checkpoint's snapshotState said`,
        );
      }
      if (at.position < expected) {
        throw this.violation(
          "pollNext",
          `${who} went back in split '${batch.splitId}': it handed out position ${at.position} (${key}) again, when position ${expected} was next — a record must come once from the start or from the restored checkpoint's position, never again`,
        );
      }
      this.emitted[at.split] = expected + 1;
      this.output.push(key);
    }
    return batch.records.length;
  }

  private checkSplitOf(splitId: string, split: number, who: string): void {
    const known = this.splitNumberOf.get(splitId);
    if (known === undefined) {
      for (const [otherId, number] of this.splitNumberOf) {
        if (number === split) {
          throw this.violation(
            "pollNext",
            `${who} returned records of one input split under two split ids: '${otherId}' and '${splitId}'`,
          );
        }
      }
      this.splitNumberOf.set(splitId, split);
      return;
    }
    if (known !== split) {
      throw this.violation(
        "pollNext",
        `${who} returned a record of another split in a batch of split '${splitId}': a batch holds the records of its own split only`,
      );
    }
  }

  private checkDiscovered(discovered: readonly SplitT[]): void {
    const ids = discovered.map((split) => split.splitId);
    if (new Set(ids).size !== ids.length) {
      throw this.violation("discoverSplits", `listed a split id twice: [${ids.join(", ")}]`);
    }
    if (ids.length !== this.scope.splits) {
      throw this.violation(
        "discoverSplits",
        `listed ${ids.length} splits ([${ids.join(", ")}]) but the case's input has ${this.scope.splits}: createSource must give a source with exactly scope.splits splits`,
      );
    }
  }

  private restoredSplits(restored: StoredSourceCheckpoint, discovered: readonly SplitT[]): SplitT[] {
    const serializer = this.serializer!;
    const splits = restored.splits.map((bytes) => serializer.deserialize(bytes));
    const known = new Set(splits.map((split) => split.splitId));
    // Like the runtime: restored splits win; discovered ones not in the checkpoint are new.
    return [...splits, ...discovered.filter((split) => !known.has(split.splitId))];
  }

  private splitNameOf(split: number): string {
    for (const [id, number] of this.splitNumberOf) if (number === split) return `'${id}'`;
    return `number ${split}`;
  }
}
