import type { IncarnationSeriesContext } from "../api/checkpointed-function.js";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { SourceOperator } from "./operators/source-operator.js";
import type { OperatorSnapshot, StreamOperator } from "./operators/stream-operator.js";
import { Subtask } from "./subtask.js";
import type { SubtaskOperators } from "./subtask-host.js";
import { SubtaskLoopMetrics } from "./subtask-loop-metrics.js";

/**
 * What every subtask of a job is started with, whichever attempt: the job's identity, its logger
 * and metrics, and its checkpointing interval.
 *
 * @example
 * ```ts
 * const job: SubtaskJob = { jobId: "orders", parallelism: 2, logger, metrics: noopMetrics, checkpointingInterval: 1000 };
 * ```
 */
export interface SubtaskJob {
  readonly jobId: string;
  readonly parallelism: number;
  /** The job's logger: each subtask logs through a child of it. */
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Undefined with checkpointing off. */
  readonly checkpointingInterval: number | undefined;
}

/**
 * One subtask of one attempt: where it restores from, and its operators as wired for this event loop.
 *
 * @example
 * ```ts
 * const start: SubtaskStart = { subtaskIndex: 0, attemptNumber: 0, incarnation: 1, restoredCheckpointId: undefined, restored: undefined, local };
 * ```
 */
export interface SubtaskStart {
  readonly subtaskIndex: number;
  readonly attemptNumber: number;
  readonly incarnation: number;
  readonly restoredCheckpointId: number | undefined;
  /** The subtask's share of the restored checkpoint, by operator uid. */
  readonly restored: Record<string, OperatorSnapshot> | undefined;
  /** The wired operators of the subtasks this event loop runs; `subtaskIndex` must be among them. */
  readonly local: SubtaskOperators;
  readonly incarnationSeries?: IncarnationSeriesContext;
}

/**
 * Starts one subtask: initializes its operators from their restored state (in topological order),
 * attaches their flow metrics and initializes the subtask. A subtask that fails to start has closed
 * what it started before the error is thrown.
 *
 * @example
 * ```ts
 * const subtask = await createSubtask(job, { subtaskIndex: 0, attemptNumber: 0, incarnation, restoredCheckpointId, restored, local });
 * ```
 */
export async function createSubtask(job: SubtaskJob, start: SubtaskStart): Promise<Subtask> {
  const {
    subtaskIndex,
    attemptNumber,
    incarnation,
    restoredCheckpointId,
    restored,
    local,
    incarnationSeries,
  } = start;
  const logger = job.logger.child({ subtask: subtaskIndex });
  const operators = local.operatorsOf.get(subtaskIndex)!;
  const loopMetrics = new SubtaskLoopMetrics(job.metrics, job.jobId, subtaskIndex, operators);
  const environment = {
    jobId: job.jobId,
    subtaskIndex,
    parallelism: job.parallelism,
    attemptNumber,
    incarnation,
    ...(incarnationSeries === undefined ? {} : { incarnationSeries }),
    logger,
    metrics: job.metrics,
    restoredCheckpointId,
    checkpointingInterval: job.checkpointingInterval,
    loopMetrics,
  };
  // A subtask that fails to start is never closed by the attempt's shutdown: close here what did
  // start, so that their open transactions are aborted and their connections released (a sink's
  // closeResources runs once per attempt on every path).
  const initialized: StreamOperator[] = [];
  try {
    for (const operator of operators) {
      await operator.initialize(environment, restored?.[operator.uid]);
      operator.attachFlowMetrics(environment);
      initialized.push(operator);
    }
    const sources = operators.filter(
      (operator): operator is SourceOperator => operator instanceof SourceOperator,
    );
    const subtask = new Subtask(subtaskIndex, operators, sources, logger, local.exchange);
    subtask.loopMetrics = loopMetrics;
    await subtask.initialize();
    return subtask;
  } catch (error) {
    loopMetrics.close();
    // Subtask.close never throws, logs failures and gives up a close that hangs.
    await new Subtask(subtaskIndex, initialized, [], logger).close();
    throw error;
  }
}

/**
 * The series an attempt's incarnation is numbered in, for connectors that keep incarnations
 * outside the storage.
 *
 * @example
 * ```ts
 * const incarnationSeries = await incarnationSeriesOf(storage, "orders");
 * ```
 */
export async function incarnationSeriesOf(
  storage: CheckpointStorage,
  jobId: string,
): Promise<IncarnationSeriesContext> {
  const { series } = await storage.describeIncarnations(jobId);
  return { series, newestIncarnation: async () => (await storage.describeIncarnations(jobId)).newest };
}
