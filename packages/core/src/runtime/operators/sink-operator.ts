import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import type { Counter } from "../../observability/metrics.js";
import { MetricNames } from "../../observability/metrics.js";
import type { Sink, SinkContext } from "../../sink/sink.js";
import {
  type OperatorEnvironment,
  type OperatorSnapshot,
  type RecordBatch,
  StreamOperator,
} from "./stream-operator.js";
import { UserFunctionState } from "./user-function-state.js";

/** Hands records to a {@link Sink} and drives its checkpoint callbacks. */
export class SinkOperator extends StreamOperator {
  private state: UserFunctionState | undefined;
  private recordsOut: Counter | undefined;
  private labels: Record<string, string> = {};
  private loopMetrics: OperatorEnvironment["loopMetrics"];
  private readonly context: { timestamp: number | undefined; currentWatermark: number; splitId: string } = {
    timestamp: undefined,
    currentWatermark: -Infinity,
    splitId: "",
  };

  constructor(
    uid: string,
    private readonly sink: Sink<unknown>,
  ) {
    super(uid);
  }

  override async initialize(
    environment: OperatorEnvironment,
    restored: OperatorSnapshot | undefined,
  ): Promise<void> {
    this.state = new UserFunctionState(this.sink, environment, this.uid);
    this.recordsOut = environment.metrics.counter(MetricNames.recordsOut, "Records written by sinks");
    this.labels = { job: environment.jobId, subtask: String(environment.subtaskIndex), operator: this.uid };
    this.recordsOut.inc(0, this.labels);
    this.loopMetrics = environment.loopMetrics;
    await this.state.initialize(restored?.operatorState);
  }

  override async open(): Promise<void> {
    await this.sink.open?.(this.state!.runtimeContext);
  }

  async processBatch(batch: RecordBatch): Promise<void> {
    const context = this.context;
    context.splitId = batch.splitKey;
    context.currentWatermark = this.currentWatermark;
    const values = batch.values;
    if (this.sink.writeBatch) {
      context.timestamp = undefined;
      const pending = this.sink.writeBatch(values, context as SinkContext);
      if (pending) await this.waitFor(pending);
    } else {
      const timestamps = batch.timestamps;
      for (let index = 0; index < values.length; index++) {
        context.timestamp = timestamps?.[index];
        const pending = this.sink.write(values[index], context as SinkContext);
        if (pending) await this.waitFor(pending);
      }
    }
    this.recordsOut!.inc(values.length, this.labels);
  }

  /** Awaits a write, counting the wait as the subtask's backpressured time. */
  private async waitFor(pending: PromiseLike<void>): Promise<void> {
    const started = performance.now();
    try {
      await pending;
    } finally {
      this.loopMetrics?.waitedForSink(performance.now() - started);
    }
  }

  override async snapshot(checkpoint: FunctionSnapshotContext): Promise<OperatorSnapshot | undefined> {
    const operatorState = await this.state!.snapshot(checkpoint);
    return operatorState ? { operatorState } : undefined;
  }

  override async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    await this.state!.notifyCheckpointComplete(checkpointId);
  }

  override async notifyCheckpointAborted(checkpointId: number): Promise<void> {
    await this.state!.notifyCheckpointAborted(checkpointId);
  }

  override async finish(): Promise<void> {
    await this.sink.finish?.();
  }

  override async close(): Promise<void> {
    await this.sink.close?.();
  }
}
