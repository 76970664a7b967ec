import type { RuntimeContext } from "../api/checkpointed-function.js";

/**
 * What a sink learns about the record being written.
 *
 * @example
 * ```ts
 * write(value: Order, context: SinkContext) { if (context.timestamp !== undefined) lag.observe(Date.now() - context.timestamp); }
 * ```
 */
export interface SinkContext {
  /** The record's event time, when the source or a watermark strategy gave one. */
  readonly timestamp: number | undefined;
  /** The current event-time watermark of this subtask (`-Infinity` before the first). */
  readonly currentWatermark: number;
  /** The split (for example a Kafka topic-partition) the record descends from. */
  readonly splitId: string;
}

/**
 * Where a stream ends. The runtime calls, per subtask: `initializeState` (when the sink is a
 * `CheckpointedFunction`), `open`, then `write`/`writeBatch` for records, `snapshotState` at each
 * checkpoint barrier, `notifyCheckpointComplete` when a checkpoint is durable, `finish` at the end
 * of bounded input (before the final checkpoint), and `close` at the end or on failure.
 *
 * Implement `CheckpointedFunction` and `CheckpointListener` as well to take part in checkpoints;
 * for exactly-once output extend {@link TwoPhaseCommitSink}.
 *
 * @example
 * ```ts
 * const printSink: Sink<string> = { write: (line) => { process.stdout.write(`${line}\n`); } };
 * ```
 */
export interface Sink<IN> {
  /** Shown in logs and errors. */
  readonly name?: string;
  open?(context: RuntimeContext): Promise<void> | void;
  write(value: IN, context: SinkContext): Promise<void> | void;
  /** Optional fast path: when present it receives whole batches instead of `write` per record. */
  writeBatch?(values: readonly IN[], context: SinkContext): Promise<void> | void;
  /** All input has arrived (bounded sources ended, or stop-with-checkpoint). */
  finish?(): Promise<void> | void;
  /** Release resources. Called after `finish`, and also on failure (then without `finish`). */
  close?(): Promise<void> | void;
}

/**
 * Builds one sink instance per subtask. Pass a factory to `sinkTo` when a process runs more than
 * one subtask, so that each subtask has its own transaction and state.
 *
 * @example
 * ```ts
 * stream.sinkTo(() => new FileSink({ directory: "out" }));
 * ```
 */
export type SinkFactory<IN> = (context: { subtaskIndex: number; parallelism: number }) => Sink<IN>;
