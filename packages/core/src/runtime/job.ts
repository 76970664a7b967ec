import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { checkpointStorageOf } from "../checkpoint/resolve-checkpointing.js";
import { ConfigurationError, OnceflowError } from "../errors/onceflow-error.js";
import { defaultLogger } from "../observability/default-logger.js";
import type { Logger } from "../observability/logger.js";
import { MetricNames, type Metrics, noopMetrics } from "../observability/metrics.js";
import { teeMetrics } from "../observability/tee-metrics.js";
import type { Source, SourceSplit } from "../source/source.js";
import { checkMaxParallelism, DEFAULT_MAX_PARALLELISM } from "../state/key-groups.js";
import type { WatermarkStrategy } from "../time/watermark-strategy.js";
import { createSubtask, incarnationSeriesOf, type SubtaskJob } from "./create-subtask.js";
import { DataStream } from "./data-stream.js";
import { checkExchangeIsLocal } from "./exchange/local-exchange.js";
import { executionNodesOf } from "./execution-nodes.js";
import { type AttemptingJob, type AttemptLineage, JobAttempt } from "./job-attempt.js";
import { countJobExecution } from "./job-executions.js";
import type { JobOptions, SourceOptions } from "./job-options.js";
import type { JobResult } from "./job-result.js";
import { type JobStatus, JobStatusTracker } from "./job-status.js";
import { SourceOperator } from "./operators/source-operator.js";
import { permanentFailureIn } from "./permanent-failure.js";
import { DEFAULT_RESTART_STRATEGY, RestartController } from "./restart-controller.js";
import { warnResumedAtEndOfInput } from "./restore/attempt-restore.js";
import { installStopSignalHandlers } from "./stop-signals.js";
import { type OperatorCreationContext, StreamGraph, type StreamNode } from "./stream-graph.js";
import type { Subtask } from "./subtask.js";
import type { HostedAttempt, SubtaskHost, SubtaskOperators } from "./subtask-host.js";
import { validateJobOptions } from "./validate-job-options.js";

export type { JobOptions, SourceOptions } from "./job-options.js";
export type { JobResult } from "./job-result.js";

/**
 * A dataflow job — Flink's `StreamExecutionEnvironment` and `JobGraph` in one. Declare sources,
 * transformations and sinks, then `execute()`. Checkpoints, restore, restarts and the final
 * commit are handled here.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "word-count", checkpointing: { interval: 1000, storage: filesystem("./checkpoints") } });
 * job.fromSource(new FileLinesSource({ paths: ["input.txt"] }), { uid: "lines" })
 *   .flatMap((line) => line.split(/\s+/))
 *   .keyBy((word) => word)
 *   .process(new CountWords(), { uid: "count" })
 *   .sinkTo(new FileSink({ directory: "out" }), { uid: "out" });
 * await job.execute();
 * ```
 */
export class Job {
  readonly jobId: string;
  private readonly graph = new StreamGraph();
  /** The graph as this process runs it (with the exchange between processes cut in), from execute(). */
  private executionNodes: readonly StreamNode[] | undefined;
  private readonly options: JobOptions;
  private readonly logger: Logger;
  private metrics: Metrics;
  private readonly parallelism: number;
  private readonly maxParallelism: number;
  private readonly localSubtasks: readonly number[];
  private storage: CheckpointStorage | undefined;
  private stopRequested = false;
  private running = false;
  /** The attempt running now, or the last one (which then neither stops nor triggers anything). */
  private attempt: JobAttempt | undefined;
  private readonly tracker: JobStatusTracker;
  /** Runs the subtasks elsewhere (worker threads) while this job coordinates them. */
  private host: SubtaskHost | undefined;

  constructor(options: JobOptions) {
    this.options = options;
    this.jobId = options.jobId;
    this.logger = (options.logger ?? defaultLogger).child({ job: options.jobId });
    this.metrics = options.metrics ?? noopMetrics;
    this.parallelism = options.parallelism ?? 1;
    this.maxParallelism = options.maxParallelism ?? DEFAULT_MAX_PARALLELISM;
    validateJobOptions(options, this.parallelism);
    checkMaxParallelism(this.maxParallelism, this.parallelism);
    this.localSubtasks =
      options.subtaskIndex === undefined
        ? Array.from({ length: this.parallelism }, (_, index) => index)
        : [options.subtaskIndex];
    this.tracker = new JobStatusTracker(
      options.jobId,
      this.localSubtasks,
      options.checkpointing ? options.checkpointing.interval : undefined,
    );
  }

  /**
   * Where the job is now: its state, last completed checkpoint and subtask loops — what health
   * checks and dashboards read (see `JobStatus`).
   *
   * @example
   * ```ts
   * const { state, lastCompletedCheckpoint } = job.status();
   * ```
   */
  status(): JobStatus {
    return this.tracker.status();
  }

  /**
   * The checkpoint storage the job uses (undefined with checkpointing off): for tools that read
   * its checkpoints while it runs, such as the dashboard.
   *
   * @example
   * ```ts
   * const storage = job.checkpointStorage();
   * ```
   */
  checkpointStorage(): CheckpointStorage | undefined {
    this.storage ??= this.resolveStorage();
    return this.storage;
  }

  /**
   * Reports metrics to `metrics` too, besides the registry in the job's options (before
   * `execute()`): how a launcher such as `onceflow run --metrics-port` adds its registry to a job
   * it did not build.
   *
   * @example
   * ```ts
   * job.attachMetrics(prometheusMetrics({ registry }));
   * await job.execute();
   * ```
   */
  attachMetrics(metrics: Metrics): void {
    if (this.running) throw new ConfigurationError("attachMetrics", "must be called before execute()");
    this.metrics = this.metrics === noopMetrics ? metrics : teeMetrics(this.metrics, metrics);
  }

  /** Starts a stream from a source. */
  fromSource<T, SplitT extends SourceSplit>(
    source: Source<T, SplitT>,
    options: SourceOptions<T> = {},
  ): DataStream<T> {
    const untyped = source as unknown as Source<unknown, SourceSplit>;
    const node = this.graph.add(
      "source",
      [],
      options.uid,
      (uid) => new SourceOperator(uid, untyped, options.watermarks as WatermarkStrategy<unknown> | undefined),
      untyped,
    );
    return new DataStream<T>(this.graph, node);
  }

  /**
   * Stops the job with a final checkpoint: sources stop reading, the last checkpoint is taken and
   * committed, `execute()` resolves with `endedBy: "stop"` (Flink's stop-with-savepoint).
   */
  stop(): void {
    this.stopRequested = true;
    this.tracker.stopping();
    this.attempt?.requestStop();
  }

  /** Runs the job until its bounded input ends or `stop()`, restarting after failures as configured. */
  async execute(): Promise<JobResult> {
    countJobExecution();
    if (this.running) throw new ConfigurationError("execute", "the job is already running");
    if (!this.graph.nodes.some((node) => node.kind === "sink")) {
      throw new ConfigurationError("job", "has no sink; add one with `sinkTo`");
    }
    checkExchangeIsLocal(
      this.graph.nodes,
      this.parallelism,
      this.options.subtaskIndex,
      this.options.exchange !== undefined,
    );
    this.executionNodes = executionNodesOf(this.graph.nodes, {
      jobId: this.jobId,
      parallelism: this.parallelism,
      maxParallelism: this.maxParallelism,
      subtaskIndex: this.options.subtaskIndex,
      exchange: this.options.exchange,
      checkpointing: Boolean(this.options.checkpointing),
    });
    this.running = true;
    this.tracker.started();
    const removeSignalHandlers = this.options.handleSignals
      ? installStopSignalHandlers(this.logger, () => this.stop())
      : () => {};
    const restarts = new RestartController(this.options.restartStrategy ?? DEFAULT_RESTART_STRATEGY);
    const restartCounter = this.metrics.counter(MetricNames.restarts, "Job restarts");
    // Counters start at 0 so that the series exists (and `increase()` works) before the first event.
    restartCounter.inc(0, { job: this.jobId });
    let attempt = 0;
    const lineageOfAttempts: AttemptLineage = {
      incarnation: undefined,
      lastCheckpointId: 0,
      firstRestoredCheckpointId: undefined,
      planned: false,
    };
    try {
      this.storage = this.resolveStorage();
      for (;;) {
        try {
          this.attempt = new JobAttempt(this.attemptingJob(), attempt, lineageOfAttempts);
          const outcome = await this.attempt.run();
          this.tracker.enter("finished");
          const resumedAtEndOfInput =
            lineageOfAttempts.firstRestoredFinal === true && outcome.endedBy === "end-of-input";
          if (resumedAtEndOfInput) {
            warnResumedAtEndOfInput(this.logger, lineageOfAttempts.firstRestoredCheckpointId);
          }
          return {
            jobId: this.jobId,
            ...outcome,
            restoredCheckpointId: lineageOfAttempts.firstRestoredCheckpointId,
            resumedAtEndOfInput,
            restarts: attempt,
          };
        } catch (error) {
          const permanent = permanentFailureIn(error);
          if (permanent !== undefined) {
            this.tracker.attemptFailed(permanent, true);
            this.logger.error(
              { attempt, err: error },
              "job attempt failed for good: a restart cannot fix this",
            );
            throw permanent;
          }
          const delay = this.stopRequested ? undefined : restarts.onFailure(performance.now());
          this.tracker.attemptFailed(error, delay === undefined);
          this.logger.error({ attempt, err: error, restartIn: delay }, "job attempt failed");
          if (delay === undefined) {
            throw new OnceflowError(
              "JOB_FAILED",
              `job '${this.jobId}' failed after ${attempt} restart(s): ${error instanceof Error ? error.message : String(error)}`,
              { cause: error },
            );
          }
          restartCounter.inc(1, { job: this.jobId });
          await new Promise((resolve) => setTimeout(resolve, delay));
          attempt++;
        }
      }
    } finally {
      removeSignalHandlers();
      this.running = false;
    }
  }

  /**
   * Runs the job as `execute()` does, with its subtasks started by `host` (one worker thread each,
   * `runSubtasksInThreads`) instead of in this event loop: this job plans each attempt's restore
   * once for every subtask, claims the incarnation of the whole job's scope (the scope of one
   * process that runs every subtask) and coordinates its checkpoints. For launchers.
   *
   * @internal
   * @example
   * ```ts
   * const result = await job.executeHosted(threadHost);
   * ```
   */
  async executeHosted(host: SubtaskHost): Promise<JobResult> {
    if (this.options.subtaskIndex !== undefined) {
      throw new ConfigurationError("executeHosted", "coordinates every subtask: leave subtaskIndex unset");
    }
    this.host = host;
    try {
      return await this.execute();
    } finally {
      this.host = undefined;
    }
  }

  /**
   * The job's operator graph, in topological order (for launchers that wire subtasks themselves).
   *
   * @internal
   * @example
   * ```ts
   * const keyed = job.streamNodes.some((node) => node.exchange !== undefined);
   * ```
   */
  get streamNodes(): readonly StreamNode[] {
    return this.graph.nodes;
  }

  /**
   * Starts this job's one subtask (`subtaskIndex`) for an attempt that another job coordinates
   * (see `executeHosted`): its operators, wired by `wire`, are initialized from `attempt`'s state
   * and opened; the caller runs the subtask's loop and relays the coordinator's calls to it.
   *
   * @internal
   * @example
   * ```ts
   * const subtask = await job.startHostedSubtask(attempt, (nodes, context, wake) => wireOperators(nodes, context, wake));
   * ```
   */
  async startHostedSubtask(
    attempt: HostedAttempt,
    wire: (
      nodes: readonly StreamNode[],
      context: OperatorCreationContext,
      wake: () => void,
    ) => SubtaskOperators,
  ): Promise<Subtask> {
    const subtaskIndex = this.options.subtaskIndex;
    if (subtaskIndex === undefined) {
      throw new ConfigurationError("startHostedSubtask", "needs a job built for one subtask (subtaskIndex)");
    }
    this.storage ??= this.resolveStorage();
    const storage = this.options.checkpointing ? this.storage : undefined;
    const incarnationSeries =
      storage === undefined ? undefined : await incarnationSeriesOf(storage, this.jobId);
    let subtask: Subtask | undefined;
    const operators = wire(this.graph.nodes, this.creationContext(subtaskIndex), () =>
      subtask?.workArrived(),
    );
    subtask = await createSubtask(this.subtaskJob(), {
      subtaskIndex,
      attemptNumber: attempt.attemptNumber,
      incarnation: attempt.incarnation,
      restoredCheckpointId: attempt.restoredCheckpointId,
      restored: attempt.restoredOf(subtaskIndex),
      local: operators,
      ...(incarnationSeries === undefined ? {} : { incarnationSeries }),
    });
    return subtask;
  }

  /**
   * Triggers a checkpoint now in the running attempt (after the one in flight, if any) and resolves
   * with its id once it is stored and every operator was told it completed — Flink's manual
   * checkpoint trigger. Rejects when it failed, or when no attempt runs or checkpointing is off.
   *
   * @example
   * ```ts
   * const running = job.execute();
   * const checkpointId = await job.triggerCheckpoint();
   * ```
   */
  async triggerCheckpoint(): Promise<number> {
    const coordinator = this.attempt?.coordinator;
    if (coordinator === undefined) {
      throw new ConfigurationError("triggerCheckpoint", "the job is not running (call execute() first)");
    }
    return coordinator.triggerCheckpoint();
  }

  /** What every subtask of this job is started with. */
  private subtaskJob(): SubtaskJob {
    return {
      jobId: this.jobId,
      parallelism: this.parallelism,
      logger: this.logger,
      metrics: this.metrics,
      checkpointingInterval: this.options.checkpointing ? this.options.checkpointing.interval : undefined,
    };
  }

  /** What an attempt of this job's run needs of it. */
  private attemptingJob(): AttemptingJob {
    return {
      ...this.subtaskJob(),
      options: this.options,
      localSubtasks: this.localSubtasks,
      storage: this.options.checkpointing ? this.storage : undefined,
      host: this.host,
      nodes: this.executionNodes ?? this.graph.nodes,
      tracker: this.tracker,
      creationContext: (subtaskIndex) => this.creationContext(subtaskIndex),
      stopRequested: () => this.stopRequested,
    };
  }

  private creationContext(subtaskIndex: number): OperatorCreationContext {
    return {
      subtaskIndex,
      parallelism: this.parallelism,
      subtasksInProcess: this.localSubtasks.length,
      maxParallelism: this.maxParallelism,
    };
  }

  private resolveStorage(): CheckpointStorage | undefined {
    const checkpointing = this.options.checkpointing;
    if (!checkpointing) return undefined;
    if (this.storage) return this.storage;
    return checkpointStorageOf(checkpointing);
  }
}
