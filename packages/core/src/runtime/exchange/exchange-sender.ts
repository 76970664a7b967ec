import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import type { Sink } from "../../sink/sink.js";
import { assignToKeyGroup } from "../../state/key-groups.js";
import { checkKey } from "../operators/keyed-process-operator.js";
import { SinkOperator } from "../operators/sink-operator.js";
import type { OperatorSnapshot, RecordBatch } from "../operators/stream-operator.js";
import type { ExchangeControlRecord, ExchangeDataRecord } from "./cross-process-exchange.js";

/** Where a sender is, for the control records it writes. */
interface SenderPosition {
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly maxParallelism: number;
}

/**
 * The sending side of a `keyBy` exchange between processes: each record goes into the exchange's
 * exactly-once sink tagged with its key group. At every checkpoint, before the sink pre-commits,
 * a control record goes into every key group with this sender's watermark, idleness and end of
 * input: written in the same transaction as the records before it, it becomes visible with them,
 * so a keyed subtask never sees a watermark ahead of records it has yet to read.
 */
export class ExchangeSenderOperator extends SinkOperator {
  private watermark = -Infinity;
  private idle = false;
  private finished = false;

  constructor(
    uid: string,
    sink: Sink<unknown>,
    private readonly keyedUid: string,
    private readonly keySelector: (value: unknown) => unknown,
    private readonly position: SenderPosition,
  ) {
    super(uid, sink);
  }

  override processBatch(batch: RecordBatch): Promise<void> {
    const { values, timestamps } = batch;
    const records = new Array<ExchangeDataRecord>(values.length);
    const maxParallelism = this.position.maxParallelism;
    for (let index = 0; index < values.length; index++) {
      const value = values[index];
      records[index] = {
        kind: "data",
        keyGroup: assignToKeyGroup(checkKey(this.keySelector(value), this.keyedUid), maxParallelism),
        value,
        timestamp: timestamps?.[index],
      };
    }
    return super.processBatch({ splitKey: batch.splitKey, values: records, timestamps });
  }

  // The combined watermark of the input: +Infinity once every input has ended.
  protected override async onWatermark(watermark: number): Promise<void> {
    this.watermark = watermark;
  }

  protected override async emitIdleness(idle: boolean): Promise<void> {
    this.idle = idle;
  }

  override async snapshot(checkpoint: FunctionSnapshotContext): Promise<OperatorSnapshot | undefined> {
    if (!this.finished) await this.writeProgress();
    return super.snapshot(checkpoint);
  }

  override async finish(): Promise<void> {
    await this.writeProgress();
    this.finished = true;
    await super.finish();
  }

  private async writeProgress(): Promise<void> {
    const { subtaskIndex, parallelism, maxParallelism } = this.position;
    const ended = this.watermark === Infinity;
    const records = new Array<ExchangeControlRecord>(maxParallelism);
    for (let keyGroup = 0; keyGroup < maxParallelism; keyGroup++) {
      records[keyGroup] = {
        kind: "control",
        keyGroup,
        sender: subtaskIndex,
        senderParallelism: parallelism,
        watermark: this.watermark,
        idle: this.idle && !ended,
        ended,
      };
    }
    await super.processBatch({ splitKey: this.uid, values: records, timestamps: undefined });
  }
}
