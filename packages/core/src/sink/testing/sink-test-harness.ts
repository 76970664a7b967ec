import type { FunctionInitializationContext, RuntimeContext } from "../../api/checkpointed-function.js";
import { isCheckpointedFunction, isCheckpointListener } from "../../api/checkpointed-function.js";
import { createMemoryLogger, type LogEntry, type Logger } from "../../observability/logger.js";
import { createMemoryMetrics, type MemoryMetrics } from "../../observability/metrics.js";
import { DefaultOperatorStateStore, type OperatorStateSnapshot } from "../../state/operator-state-store.js";
import type { Sink, SinkContext } from "../sink.js";

/**
 * A checkpoint taken by {@link SinkTestHarness.snapshot}: what a restore needs.
 *
 * @example
 * ```ts
 * const checkpoint: HarnessCheckpoint = await harness.snapshot(3);
 * ```
 */
export interface HarnessCheckpoint {
  readonly checkpointId: number;
  readonly state: OperatorStateSnapshot;
}

/**
 * Drives one sink instance the way the runtime drives a subtask (`initializeState`, `open`,
 * `writeBatch`, `snapshotState` + operator state snapshot, `notifyCheckpointComplete`, `finish`,
 * `close`), with an in-memory state store, logger and metrics — Flink's
 * `OneInputStreamOperatorTestHarness`, for unit tests of sinks. Simulate a failure by dropping the
 * instance (`close()` without `finish()`) and restoring a new one from a {@link HarnessCheckpoint}.
 *
 * @example
 * ```ts
 * const harness = new SinkTestHarness(new MySink());
 * await harness.initialize();
 * await harness.write("a", "b");
 * const checkpoint = await harness.snapshot(1);
 * await harness.close(); // crash before the commit
 * const restored = new SinkTestHarness(new MySink());
 * await restored.initialize(checkpoint); // recovers and commits "a", "b"
 * ```
 */
export class SinkTestHarness<IN> {
  readonly sink: Sink<IN>;
  readonly logger: Logger & { readonly entries: LogEntry[] };
  readonly metrics: MemoryMetrics;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  private store = new DefaultOperatorStateStore();
  private readonly runtimeContext: RuntimeContext;

  constructor(
    sink: Sink<IN>,
    options: {
      subtaskIndex?: number;
      parallelism?: number;
      jobId?: string;
      attemptNumber?: number;
      /** The attempt's incarnation the sink sees (default `attemptNumber + 1`). */
      incarnation?: number;
      logger?: Logger & { readonly entries: LogEntry[] };
      metrics?: MemoryMetrics;
      /** What the sink sees as the job's checkpoint interval (default: checkpointing off). */
      checkpointingInterval?: number;
    } = {},
  ) {
    this.sink = sink;
    this.subtaskIndex = options.subtaskIndex ?? 0;
    this.parallelism = options.parallelism ?? 1;
    this.logger = options.logger ?? createMemoryLogger();
    this.metrics = options.metrics ?? createMemoryMetrics();
    this.runtimeContext = {
      jobId: options.jobId ?? "test-job",
      operatorUid: "sink",
      subtaskIndex: this.subtaskIndex,
      parallelism: this.parallelism,
      attemptNumber: options.attemptNumber ?? 0,
      incarnation: options.incarnation ?? (options.attemptNumber ?? 0) + 1,
      checkpointingInterval: options.checkpointingInterval,
      logger: this.logger,
      metrics: this.metrics,
    };
  }

  /**
   * `initializeState` (fresh, or restored from `checkpoint`) then `open`.
   *
   * @example
   * ```ts
   * await harness.initialize(checkpoint);
   * ```
   */
  async initialize(checkpoint?: HarnessCheckpoint): Promise<void> {
    this.store = new DefaultOperatorStateStore(checkpoint?.state ?? {});
    const store = this.store;
    const initializationContext: FunctionInitializationContext = {
      ...this.runtimeContext,
      isRestored: () => checkpoint !== undefined,
      getRestoredCheckpointId: () => checkpoint?.checkpointId,
      getOperatorStateStore: () => store,
    };
    if (isCheckpointedFunction(this.sink)) await this.sink.initializeState(initializationContext);
    await this.sink.open?.(this.runtimeContext);
  }

  /**
   * Writes the values as one batch (`writeBatch` when the sink has it, else `write` per value).
   *
   * @example
   * ```ts
   * await harness.write(1, 2, 3);
   * ```
   */
  async write(...values: IN[]): Promise<void> {
    const context: SinkContext = {
      timestamp: undefined,
      currentWatermark: Number.NEGATIVE_INFINITY,
      splitId: "0",
    };
    if (this.sink.writeBatch !== undefined) await this.sink.writeBatch(values, context);
    else for (const value of values) await this.sink.write(value, context);
  }

  /**
   * `snapshotState(checkpointId)` then the operator state snapshot, as the runtime stores it.
   *
   * @example
   * ```ts
   * const checkpoint = await harness.snapshot(4);
   * ```
   */
  async snapshot(checkpointId: number, checkpointTimestamp = Date.now()): Promise<HarnessCheckpoint> {
    if (isCheckpointedFunction(this.sink))
      await this.sink.snapshotState({ checkpointId, checkpointTimestamp });
    return { checkpointId, state: this.store.snapshot() };
  }

  /**
   * `notifyCheckpointComplete(checkpointId)`.
   *
   * @example
   * ```ts
   * await harness.notifyComplete(4);
   * ```
   */
  async notifyComplete(checkpointId: number): Promise<void> {
    if (isCheckpointListener(this.sink)) await this.sink.notifyCheckpointComplete(checkpointId);
  }

  /**
   * `notifyCheckpointAborted(checkpointId)`, when the sink listens for it.
   *
   * @example
   * ```ts
   * await harness.notifyAborted(5);
   * ```
   */
  async notifyAborted(checkpointId: number): Promise<void> {
    if (isCheckpointListener(this.sink)) await this.sink.notifyCheckpointAborted?.(checkpointId);
  }

  /**
   * A whole checkpoint: snapshot then complete.
   *
   * @example
   * ```ts
   * await harness.checkpoint(6);
   * ```
   */
  async checkpoint(checkpointId: number): Promise<HarnessCheckpoint> {
    const checkpoint = await this.snapshot(checkpointId);
    await this.notifyComplete(checkpointId);
    return checkpoint;
  }

  /**
   * The end of bounded input: `finish`, a final checkpoint, `close`.
   *
   * @example
   * ```ts
   * await harness.finishAndClose(9);
   * ```
   */
  async finishAndClose(finalCheckpointId: number): Promise<HarnessCheckpoint> {
    await this.sink.finish?.();
    const checkpoint = await this.checkpoint(finalCheckpointId);
    await this.close();
    return checkpoint;
  }

  /**
   * `close()` (without `finish`, as after a failure).
   *
   * @example
   * ```ts
   * await harness.close();
   * ```
   */
  async close(): Promise<void> {
    await this.sink.close?.();
  }
}
