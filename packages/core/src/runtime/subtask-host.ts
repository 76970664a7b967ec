import type { OperatorSnapshot, StreamOperator } from "./operators/stream-operator.js";
import type { AttemptSubtask, SubtaskExchange } from "./subtask.js";

/**
 * What an attempt hands to the subtasks it starts elsewhere: its number and incarnation, the
 * checkpoint it restores, and each subtask's share of that checkpoint (planned once, for every
 * subtask, by the job that coordinates them).
 *
 * @example
 * ```ts
 * const attempt: HostedAttempt = { attemptNumber: 0, incarnation: 1, restoredCheckpointId: undefined, restoredOf: () => undefined };
 * ```
 */
export interface HostedAttempt {
  readonly attemptNumber: number;
  readonly incarnation: number;
  readonly restoredCheckpointId: number | undefined;
  readonly restoredOf: (subtaskIndex: number) => Record<string, OperatorSnapshot> | undefined;
}

/**
 * Runs a job's subtasks outside the coordinating job's event loop (one worker thread each), while
 * that job plans the restore, claims the incarnation, coordinates checkpoints and restarts: `start`
 * starts every subtask of an attempt and resolves once each has restored and opened its operators.
 *
 * @example
 * ```ts
 * const result = await job.executeHosted({ start: async (attempt) => startThreads(attempt) });
 * ```
 */
export interface SubtaskHost {
  start(attempt: HostedAttempt): Promise<AttemptSubtask[]>;
}

/**
 * The operators of the subtasks an event loop runs, wired, with the exchange when there is one.
 *
 * @example
 * ```ts
 * const operators: SubtaskOperators = { operatorsOf: new Map([[0, []]]), exchange: undefined };
 * ```
 */
export interface SubtaskOperators {
  /** By subtask index: its operators in topological order. */
  readonly operatorsOf: ReadonlyMap<number, StreamOperator[]>;
  readonly exchange: SubtaskExchange | undefined;
}
