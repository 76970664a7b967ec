import type { Source, SourceBatch, SourceReader, SourceSplit } from "../../src/index.js";
import type { ProcessGate } from "./process-gate.js";

/** A split of the {@link ControlledInput}: split `index` holds records `index × perSplit + offset`. */
export interface ControlledSplit extends SourceSplit {
  readonly index: number;
  position: number;
}

/**
 * The bounded input of an exploration, like a topic whose partitions grow only when the model says
 * "records arrive". Record values are distinct numbers `0 … splits × perSplit − 1`, so the committed
 * output can be checked for exactly once.
 *
 * @example
 * ```ts
 * const input = new ControlledInput(4, 10);
 * input.arrive(2, 3); // three more records of split 2 can be read
 * ```
 */
export class ControlledInput {
  readonly available: number[];
  /** How many records the keyed job's running count processed, in every process (see `keyed-job.ts`). */
  keyedRecordsProcessed = 0;
  private waiters: (() => void)[] = [];

  constructor(
    readonly splits: number,
    readonly perSplit: number,
  ) {
    this.available = new Array<number>(splits).fill(0);
  }

  get total(): number {
    return this.splits * this.perSplit;
  }

  /** Makes up to `count` more records of split `index` readable. */
  arrive(index: number, count: number): void {
    this.available[index] = Math.min(this.perSplit, (this.available[index] ?? 0) + count);
    this.wake();
  }

  /** Makes the whole input readable (the final phase). */
  arriveAll(): void {
    this.available.fill(this.perSplit);
    this.wake();
  }

  /** Resolves on the next arrival. */
  nextArrival(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** Reads a process's splits of the {@link ControlledInput} through its {@link ProcessGate}. */
class ControlledReader implements SourceReader<number, ControlledSplit> {
  readonly splits: ControlledSplit[] = [];

  constructor(
    private readonly input: ControlledInput,
    private readonly gate: ProcessGate,
  ) {}

  addSplits(splits: ControlledSplit[]): void {
    for (const split of splits) this.splits.push({ ...split });
  }

  async pollNext(): Promise<SourceBatch<number> | undefined> {
    await this.gate.whenOpen();
    const split = this.splits.find((each) => each.position < (this.input.available[each.index] ?? 0));
    if (split === undefined) return undefined;
    const end = this.input.available[split.index] ?? 0;
    const records: number[] = [];
    for (; split.position < end; split.position++)
      records.push(split.index * this.input.perSplit + split.position);
    return { splitId: split.splitId, records };
  }

  isAvailable(): Promise<void> {
    if (this.caughtUp()) return this.input.nextArrival();
    return Promise.resolve();
  }

  isFinished(): boolean {
    return this.splits.every((split) => split.position >= this.input.perSplit);
  }

  /** True when every record that arrived on this reader's splits was read. */
  caughtUp(): boolean {
    return this.splits.every((split) => split.position >= (this.input.available[split.index] ?? 0));
  }

  snapshotState(): ControlledSplit[] {
    return this.splits.map((split) => ({ ...split }));
  }

  async close(): Promise<void> {}
}

/**
 * The {@link ControlledInput} as a bounded {@link Source}: split `i` goes to subtask `i % parallelism`.
 * Every reader it makes is kept in `readers`, so the model can wait until they caught up.
 *
 * @example
 * ```ts
 * job.fromSource(new ControlledSource(input, gate), { uid: "input" });
 * ```
 */
export class ControlledSource implements Source<number, ControlledSplit> {
  readonly name = "controlled";
  readonly boundedness = "bounded";
  readonly readers: ControlledReader[] = [];

  constructor(
    private readonly input: ControlledInput,
    private readonly gate: ProcessGate,
  ) {}

  async discoverSplits(): Promise<ControlledSplit[]> {
    await this.gate.whenOpen();
    return Array.from({ length: this.input.splits }, (_, index) => ({
      splitId: `split-${index}`,
      index,
      position: 0,
    }));
  }

  assignSplit(split: ControlledSplit, parallelism: number): number {
    return split.index % parallelism;
  }

  createReader(): ControlledReader {
    const reader = new ControlledReader(this.input, this.gate);
    this.readers.push(reader);
    return reader;
  }
}
