import type { FunctionSnapshotContext, IncarnationSeriesContext } from "../../api/checkpointed-function.js";
import type { Logger } from "../../observability/logger.js";
import { type Counter, type MetricLabels, MetricNames, type Metrics } from "../../observability/metrics.js";
import type { KeyedScopeSnapshot } from "../../state/keyed-state-backend.js";
import type { OperatorStateSnapshot } from "../../state/operator-state-store.js";
import type { StageGate } from "../exchange/stage-gate.js";
import type { SubtaskLoopMetrics } from "../subtask-loop-metrics.js";
import type { Timer } from "../timer-queue.js";

/**
 * Records moving between operators: all from one split, in order. `timestamps` holds event times
 * (or is undefined when no record has one).
 */
export interface RecordBatch {
  readonly splitKey: string;
  readonly values: unknown[];
  readonly timestamps: ReadonlyArray<number | undefined> | undefined;
}

/** What one operator contributes to a subtask's checkpoint. */
export interface OperatorSnapshot {
  operatorState?: OperatorStateSnapshot;
  /**
   * What the scopes of `keyed` and the timers are: key groups (`keyBy`) or split keys
   * (`reinterpretAsKeyedStream`). Absent in checkpoints written before key groups: then per split.
   */
  keyedBy?: "key-group" | "split";
  /** The job's `maxParallelism` when `keyedBy` is `key-group` (how many key groups there are). */
  maxParallelism?: number;
  keyed?: Record<string, KeyedScopeSnapshot>;
  eventTimers?: Record<string, Timer[]>;
  processingTimers?: Record<string, Timer[]>;
  /** Source splits with their positions, keyed by split key, plus each split's highest event time. */
  splits?: Array<{ splitKey: string; bytes: Buffer; maxTimestamp: number | undefined }>;
}

/** Facts every operator of a subtask shares. */
export interface OperatorEnvironment {
  readonly jobId: string;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly attemptNumber: number;
  /** The attempt's incarnation (see `RuntimeContext.incarnation`). */
  readonly incarnation: number;
  /** The series of `incarnation` (see `RuntimeContext.incarnationSeries`); absent without checkpointing. */
  readonly incarnationSeries?: IncarnationSeriesContext;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** The restored checkpoint's id, or undefined on a fresh start. */
  readonly restoredCheckpointId: number | undefined;
  /** The checkpoint interval in ms, or undefined when checkpointing is off. */
  readonly checkpointingInterval: number | undefined;
  /** Where the subtask's loop spends its time (a sink reports its waits to it). */
  readonly loopMetrics?: SubtaskLoopMetrics;
}

interface Edge {
  readonly operator: StreamOperator;
  readonly inputIndex: number;
  /** The gate of the downstream stage, when this edge enters a stage other loops also call into. */
  readonly gate: StageGate | undefined;
}

/**
 * The runtime's unit of processing inside a subtask. All calls come from the subtask's single
 * loop (its mailbox), or — for an operator behind an exchange, when several subtasks share the
 * process — from any loop through its stage's {@link StageGate}, so an operator never sees two
 * calls at once. A checkpoint is one mailbox action that snapshots every operator in topological
 * order while no batch is in flight (see `CheckpointAlignment` for the exchange).
 */
export abstract class StreamOperator {
  private readonly outputs: Edge[] = [];
  private inputWatermarks: number[] = [-Infinity];
  /** Inputs whose sources are all idle: they do not hold the combined watermark back. */
  private idleInputs: boolean[] = [false];
  /** The combined watermark of this operator's inputs. */
  currentWatermark = -Infinity;
  // Flink's numRecordsIn/numRecordsOut of every operator, counted per batch (see attachFlowMetrics).
  private flowLabels: MetricLabels = {};
  private operatorRecordsIn: Counter | undefined;
  private operatorRecordsOut: Counter | undefined;

  constructor(readonly uid: string) {}

  /**
   * The gate of the stage this operator belongs to, when other subtasks' loops also call into it
   * (behind an exchange, several subtasks in one process); undefined otherwise.
   */
  gate: StageGate | undefined;

  /**
   * Connects `downstream` as the next operator (it sees us as its next input index). Calls along
   * the edge go through `gate` when given: the edge enters another stage.
   */
  connectTo(downstream: StreamOperator, gate?: StageGate): void {
    const inputIndex = downstream.addInput();
    this.outputs.push({ operator: downstream, inputIndex, gate });
  }

  private addInput(): number {
    if (this.inputCount === 0) {
      this.inputCount = 1;
      return 0;
    }
    this.inputWatermarks.push(-Infinity);
    this.idleInputs.push(false);
    return this.inputCount++;
  }

  private inputCount = 0;

  abstract processBatch(batch: RecordBatch): void | Promise<void>;

  /**
   * Counts the records this operator receives from upstream operators and emits downstream
   * (`onceflow_operator_records_in_total` / `_out_total`, labelled job, subtask, operator).
   */
  attachFlowMetrics(environment: OperatorEnvironment): void {
    const { metrics } = environment;
    this.flowLabels = {
      job: environment.jobId,
      subtask: String(environment.subtaskIndex),
      operator: this.uid,
    };
    this.operatorRecordsIn = metrics.counter(
      MetricNames.operatorRecordsIn,
      "Records an operator received from the operators before it",
    );
    this.operatorRecordsOut = metrics.counter(
      MetricNames.operatorRecordsOut,
      "Records an operator emitted to the operators after it",
    );
    if (this.inputCount > 0) this.operatorRecordsIn.inc(0, this.flowLabels);
    if (this.outputs.length > 0) this.operatorRecordsOut.inc(0, this.flowLabels);
  }

  private countIn(records: number): void {
    this.operatorRecordsIn?.inc(records, this.flowLabels);
  }

  initialize(
    _environment: OperatorEnvironment,
    _restored: OperatorSnapshot | undefined,
  ): void | Promise<void> {}
  open(): void | Promise<void> {}
  snapshot(
    _checkpoint: FunctionSnapshotContext,
  ): OperatorSnapshot | undefined | Promise<OperatorSnapshot | undefined> {
    return undefined;
  }
  notifyCheckpointComplete(_checkpointId: number): void | Promise<void> {}
  notifyCheckpointAborted(_checkpointId: number): void | Promise<void> {}
  /** End of input: every record has arrived. */
  finish(): void | Promise<void> {}
  close(): void | Promise<void> {}
  /** Earliest processing-time timer, for the subtask loop's sleep. */
  nextProcessingTime(): number | undefined {
    return undefined;
  }
  fireProcessingTimers(_now: number): void | Promise<void> {}

  /** Called by an upstream operator; the combined watermark is the minimum over active inputs. */
  async receiveWatermark(inputIndex: number, watermark: number): Promise<void> {
    const inputs = this.inputWatermarks;
    if (watermark <= (inputs[inputIndex] ?? -Infinity)) return;
    inputs[inputIndex] = watermark;
    await this.advanceCombinedWatermark();
  }

  /**
   * An input became idle (every split of its source is idle) or active again. Idle inputs are left
   * out of the minimum, so one quiet source does not stall event time downstream — Flink's
   * `WatermarkStatus.IDLE`.
   */
  async receiveIdleness(inputIndex: number, idle: boolean): Promise<void> {
    if (this.idleInputs[inputIndex] === idle) return;
    this.idleInputs[inputIndex] = idle;
    await this.emitIdleness(this.idleInputs.every(Boolean));
    if (!idle) return;
    await this.advanceCombinedWatermark();
  }

  private async advanceCombinedWatermark(): Promise<void> {
    let combined = Infinity;
    let active = 0;
    for (let index = 0; index < this.inputWatermarks.length; index++) {
      if (this.idleInputs[index]) continue;
      active++;
      const value = this.inputWatermarks[index]!;
      if (value < combined) combined = value;
    }
    if (active === 0 || combined <= this.currentWatermark) return;
    this.currentWatermark = combined;
    await this.onWatermark(combined);
  }

  private emittedIdleness = false;

  protected async emitIdleness(idle: boolean): Promise<void> {
    if (this.emittedIdleness === idle) return;
    this.emittedIdleness = idle;
    for (const output of this.outputs) {
      const { operator, inputIndex, gate } = output;
      if (gate) await gate.run(() => operator.receiveIdleness(inputIndex, idle));
      else await operator.receiveIdleness(inputIndex, idle);
    }
  }

  protected async onWatermark(watermark: number): Promise<void> {
    await this.emitWatermark(watermark);
  }

  protected emit(batch: RecordBatch): void | Promise<void> {
    const records = batch.values.length;
    if (records === 0) return;
    this.operatorRecordsOut?.inc(records, this.flowLabels);
    const outputs = this.outputs;
    if (outputs.length === 1) return this.deliver(outputs[0]!, batch);
    return this.emitToEach(batch);
  }

  /** Emits `batch` to one output only (the exchange picks the subtask that owns its key groups). */
  protected emitTo(outputIndex: number, batch: RecordBatch): void | Promise<void> {
    const records = batch.values.length;
    if (records === 0) return;
    this.operatorRecordsOut?.inc(records, this.flowLabels);
    return this.deliver(this.outputs[outputIndex]!, batch);
  }

  private deliver(output: Edge, batch: RecordBatch): void | Promise<void> {
    const next = output.operator;
    const gate = output.gate;
    if (gate) {
      return gate.run(() => {
        next.countIn(batch.values.length);
        return next.processBatch(batch);
      });
    }
    next.countIn(batch.values.length);
    return next.processBatch(batch);
  }

  private async emitToEach(batch: RecordBatch): Promise<void> {
    for (const output of this.outputs) await this.deliver(output, batch);
  }

  protected async emitWatermark(watermark: number): Promise<void> {
    for (const output of this.outputs) {
      const { operator, inputIndex, gate } = output;
      if (gate) await gate.run(() => operator.receiveWatermark(inputIndex, watermark));
      else await operator.receiveWatermark(inputIndex, watermark);
    }
  }
}
