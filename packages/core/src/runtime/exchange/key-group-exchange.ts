import { assignToKeyGroup, operatorIndexForKeyGroup } from "../../state/key-groups.js";
import { checkKey } from "../operators/keyed-process-operator.js";
import { type RecordBatch, StreamOperator } from "../operators/stream-operator.js";

/**
 * The sending side of a `keyBy` exchange in one subtask: splits each batch by the subtask that owns
 * each record's key group and hands every part to that subtask's keyed stage (output `i` is
 * subtask `i`), in the batch's order. Watermarks and idleness go to every subtask: each keyed stage
 * takes the minimum over its input channels, one per sending subtask.
 */
export class KeyGroupExchangeOperator extends StreamOperator {
  /** The owning subtask of each key group. */
  private readonly ownerOfKeyGroup: Uint16Array;

  constructor(
    uid: string,
    private readonly keyedUid: string,
    private readonly keySelector: (value: unknown) => unknown,
    private readonly maxParallelism: number,
    private readonly parallelism: number,
  ) {
    super(uid);
    this.ownerOfKeyGroup = new Uint16Array(maxParallelism);
    for (let keyGroup = 0; keyGroup < maxParallelism; keyGroup++) {
      this.ownerOfKeyGroup[keyGroup] = operatorIndexForKeyGroup(maxParallelism, parallelism, keyGroup);
    }
  }

  async processBatch(batch: RecordBatch): Promise<void> {
    const { values, timestamps } = batch;
    const parallelism = this.parallelism;
    const parts = Array.from({ length: parallelism }, () => ({
      values: [] as unknown[],
      timestamps: timestamps ? ([] as Array<number | undefined>) : undefined,
    }));
    for (let index = 0; index < values.length; index++) {
      const value = values[index];
      const keyGroup = assignToKeyGroup(
        checkKey(this.keySelector(value), this.keyedUid),
        this.maxParallelism,
      );
      const part = parts[this.ownerOfKeyGroup[keyGroup]!]!;
      part.values.push(value);
      part.timestamps?.push(timestamps?.[index]);
    }
    for (let subtask = 0; subtask < parallelism; subtask++) {
      const part = parts[subtask]!;
      if (part.values.length === 0) continue;
      await this.emitTo(subtask, { splitKey: batch.splitKey, ...part });
    }
  }
}
