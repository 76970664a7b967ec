import { deserialize } from "node:v8";
import type { IncarnationSeriesContext } from "../api/checkpointed-function.js";
import { CheckpointCoordinator, type ResolvedCheckpointing } from "../checkpoint/checkpoint-coordinator.js";
import { DEFAULT_CHECKPOINT_HISTORY_SIZE } from "../checkpoint/checkpoint-history-entries.js";
import { CheckpointHistoryRecorder } from "../checkpoint/checkpoint-history-recorder.js";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { type CheckpointingOptions, defaultInitialDelay } from "../checkpoint/checkpointing-options.js";
import { filesystem } from "../checkpoint/filesystem-checkpoint-storage.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import { ConfigurationError, isOnceflowError, OnceflowError } from "../errors/onceflow-error.js";
import { defaultLogger } from "../observability/default-logger.js";
import type { Logger } from "../observability/logger.js";
import { MetricNames, type Metrics, noopMetrics } from "../observability/metrics.js";
import { teeMetrics } from "../observability/tee-metrics.js";
import type { Source, SourceSplit } from "../source/source.js";
import { checkMaxParallelism, DEFAULT_MAX_PARALLELISM } from "../state/key-groups.js";
import type { WatermarkStrategy } from "../time/watermark-strategy.js";
import { DataStream, type OperatorOptions } from "./data-stream.js";
import type { CrossProcessExchange } from "./exchange/cross-process-exchange.js";
import { crossProcessNodes } from "./exchange/cross-process-graph.js";
import { checkExchangeIsLocal, createLocalOperators } from "./exchange/local-exchange.js";
import { countJobExecution } from "./job-executions.js";
import { type JobStatus, JobStatusTracker } from "./job-status.js";
import { SourceOperator } from "./operators/source-operator.js";
import type { OperatorSnapshot, StreamOperator } from "./operators/stream-operator.js";
import { DEFAULT_RESTART_STRATEGY, RestartController } from "./restart-controller.js";
import type { RestartStrategy } from "./restart-strategy.js";
import { scopeOf } from "./restore/lineage.js";
import { planRestore, type RestorePlan, type RestoreSetting } from "./restore/restore-plan.js";
import { describeStartRequest } from "./restore/start-request.js";
import { checkStateClaims, claimRedistributedState } from "./restore/state-claims.js";
import { type OperatorCreationContext, StreamGraph, type StreamNode } from "./stream-graph.js";
import { type AttemptSubtask, Subtask, type SubtaskSnapshot } from "./subtask.js";
import type { HostedAttempt, SubtaskHost, SubtaskOperators } from "./subtask-host.js";
import { SubtaskLoopMetrics } from "./subtask-loop-metrics.js";
import { validateJobOptions } from "./validate-job-options.js";

/**
 * Settings of a {@link Job}.
 *
 * | Flink | onceflow |
 * |---|---|
 * | `env.setParallelism(4)` | `parallelism: 4` |
 * | `env.setMaxParallelism(128)` | `maxParallelism: 128` |
 * | `env.enableCheckpointing(5000)` | `checkpointing: { interval: 5000 }` |
 * | `env.setRestartStrategy(...)` | `restartStrategy: { type: "fixed-delay", attempts: 3, delay: 1000 }` |
 * | `-s <savepoint path>` | `restore: { checkpointId: 42 }` |
 *
 * @example
 * ```ts
 * const options: JobOptions = { jobId: "orders", parallelism: 2, checkpointing: { interval: 1000 } };
 * ```
 */
export interface JobOptions {
  /** Stable across restarts: checkpoints are found by it. Letters, digits, `.`, `_`, `-`. */
  readonly jobId: string;
  /** Subtasks of the whole job (default 1). */
  readonly parallelism?: number;
  /**
   * The number of key groups keyed state is divided into (default 128, at most 32768) — Flink's
   * `setMaxParallelism`: the highest parallelism the job can ever be rescaled to. Fixed for the
   * life of the job: it is stored with keyed state in every checkpoint, and a restore with another
   * value is refused (`CONFIGURATION`).
   */
  readonly maxParallelism?: number;
  /**
   * Run only this subtask in this process (for one process per subtask, e.g. a StatefulSet
   * ordinal). Without it, this process runs all `parallelism` subtasks.
   */
  readonly subtaskIndex?: number;
  /** Checkpointing; `false` or absent turns it off (then sinks commit only at the end of input). */
  readonly checkpointing?: CheckpointingOptions | false;
  /** Default: exponential-delay (1 s, ×1.5, up to 1 min). */
  readonly restartStrategy?: RestartStrategy;
  /**
   * Restore even when the checkpoint holds state that no operator of this job claims (an operator
   * whose `uid` was renamed or that was removed): that state is dropped with a warning naming it —
   * for a two-phase-commit sink, its pending transactions are then not committed by this job.
   * Default false: such a restore fails with `NON_RESTORED_STATE` (Flink's `--allowNonRestoredState`).
   */
  readonly allowNonRestoredState?: boolean;
  /**
   * Where the job starts: `"latest"` (default), `"none"`, or `{ checkpointId }`. Only the first
   * attempt that gets as far as its restore: a restart after a failure goes on from the latest
   * checkpoint. `"none"` and
   * `{ checkpointId }` are applied once: they start a lineage of their own, and a process started
   * again with the same setting (a restarted pod, a sibling process) goes on from that lineage's
   * latest checkpoint.
   */
  readonly restore?: RestoreSetting;
  /**
   * Where the job logs (any pino logger fits). Default: `defaultLogger` — warnings and errors to
   * standard error, or what `setDefaultLogger` (and `onceflow run --log-level`) set.
   */
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  /** Stop with a final checkpoint on SIGTERM/SIGINT (default false; the CLI turns it on). */
  readonly handleSignals?: boolean;
  /**
   * How records after `keyBy` reach subtasks that run in other processes (one process per subtask,
   * `subtaskIndex` set, parallelism above 1): a durable exactly-once transport, such as
   * `kafkaRepartitionExchange({ brokers })` from `@onceflow/connector-kafka`. Needs checkpointing.
   * Without it such a job is refused at start. Used whenever `subtaskIndex` is set, at parallelism
   * 1 too (so that a rescale to 1 still reads and commits what is in transit); unused when this
   * process runs every subtask (the exchange is then in memory).
   */
  readonly exchange?: CrossProcessExchange;
}

/**
 * How a run ended.
 *
 * @example
 * ```ts
 * const result = await job.execute();
 * console.log(result.endedBy, result.lastCheckpointId, result.restarts);
 * ```
 */
export interface JobResult {
  readonly jobId: string;
  /** `end-of-input` when bounded sources finished, `stop` after `stop()` or a signal. */
  readonly endedBy: "end-of-input" | "stop";
  /** The final checkpoint's id. */
  readonly lastCheckpointId: number;
  /** The checkpoint the first attempt restored, if any. */
  readonly restoredCheckpointId: number | undefined;
  /**
   * True when the first attempt restored the final checkpoint of a run that had ended and the input
   * ended again: bounded sources resumed at their end, so this run read nothing they had not read.
   */
  readonly resumedAtEndOfInput: boolean;
  readonly restarts: number;
}

/**
 * Options of `fromSource`.
 *
 * @example
 * ```ts
 * job.fromSource(source, { uid: "orders", watermarks: { timestampAssigner: (order) => order.at, maxOutOfOrderness: 1000 } });
 * ```
 */
export interface SourceOptions<T> extends OperatorOptions {
  readonly watermarks?: WatermarkStrategy<T>;
}

// Failures that a restart cannot fix: fail at once instead of looping.
const PERMANENT_CODES = new Set([
  "CONFIGURATION",
  "TRANSACTION_TIMED_OUT",
  "CHECKPOINT_CORRUPT",
  "CHECKPOINT_NOT_FOUND",
  "RECORD_REJECTED",
  "SUPERSEDED",
  "NON_RESTORED_STATE",
]);

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
  private requestStop: (() => void) | undefined;
  private running = false;
  /** Set once the running attempt's input ended: its final checkpoint says so in its summary. */
  private inputEnded = false;
  private coordinator: CheckpointCoordinator | undefined;
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
    this.requestStop?.();
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
    this.executionNodes = this.resolveExecutionNodes();
    this.running = true;
    this.tracker.started();
    const removeSignalHandlers = this.options.handleSignals ? this.installSignalHandlers() : () => {};
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
          const outcome = await this.runAttempt(attempt, lineageOfAttempts);
          this.tracker.enter("finished");
          const resumedAtEndOfInput =
            lineageOfAttempts.firstRestoredFinal === true && outcome.endedBy === "end-of-input";
          if (resumedAtEndOfInput) this.warnResumedAtEndOfInput(lineageOfAttempts.firstRestoredCheckpointId);
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
    const incarnationSeries = storage === undefined ? undefined : await this.incarnationSeriesOf(storage);
    let subtask: Subtask | undefined;
    const operators = wire(this.graph.nodes, this.creationContext(subtaskIndex), () =>
      subtask?.workArrived(),
    );
    subtask = await this.createSubtask(
      subtaskIndex,
      attempt.attemptNumber,
      attempt.incarnation,
      attempt.restoredCheckpointId,
      attempt.restoredOf(subtaskIndex),
      operators,
      incarnationSeries,
    );
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
    const coordinator = this.coordinator;
    if (coordinator === undefined) {
      throw new ConfigurationError("triggerCheckpoint", "the job is not running (call execute() first)");
    }
    return coordinator.triggerCheckpoint();
  }

  private async runAttempt(
    attemptNumber: number,
    attempts: AttemptLineage,
  ): Promise<{
    endedBy: JobResult["endedBy"];
    lastCheckpointId: number;
    restoredCheckpointId: number | undefined;
  }> {
    this.inputEnded = false;
    const runsAll = this.options.subtaskIndex === undefined;
    const scope = scopeOf(this.options.subtaskIndex ?? 0, this.parallelism, runsAll);
    const storage = this.options.checkpointing ? this.storage : undefined;
    // One live incarnation per scope: claim before restoring. A restart claims after its own
    // previous incarnation, so a process that was replaced meanwhile stops (SUPERSEDED) instead
    // of fencing its replacement in turn.
    const incarnation =
      storage === undefined
        ? 0
        : await storage.claimIncarnation(
            this.jobId,
            scope,
            attempts.incarnation === undefined ? {} : { after: attempts.incarnation },
          );
    attempts.incarnation = incarnation;
    const incarnationSeries = storage === undefined ? undefined : await this.incarnationSeriesOf(storage);
    this.tracker.restoring(attemptNumber);
    // `restore` names where the job starts; a restart goes on from the latest checkpoint (Flink's
    // failover after a savepoint restore), never back to the named one — unless no attempt got as far
    // as planning its restore: then the setting is not applied yet (a restore applied already is
    // skipped anyway, its lineage records it).
    const plan = await this.planRestore(
      scope,
      incarnation,
      runsAll,
      attempts.planned ? "latest" : (this.options.restore ?? "latest"),
    );
    if (!attempts.planned) {
      attempts.firstRestoredCheckpointId = plan.checkpointId;
      attempts.firstRestoredFinal =
        plan.restoredFrom.length > 0 &&
        plan.restoredFrom.every(
          (metadata) => metadata.isFinal && metadata.summary.endedBy === "end-of-input",
        );
    }
    attempts.planned = true;
    this.logStartRequest(plan);
    if (plan.checkpointId !== undefined) {
      this.logger.info(
        {
          checkpointId: plan.checkpointId,
          lineage: plan.lineage,
          incarnation,
          from: plan.restoredFrom.map((m) => `${m.scope}#${m.checkpointId}`),
        },
        "restoring checkpoint",
      );
    }
    const history =
      storage === undefined
        ? undefined
        : new CheckpointHistoryRecorder(
            storage,
            resolveCheckpointing(this.options.checkpointing)?.history ?? DEFAULT_CHECKPOINT_HISTORY_SIZE,
            this.logger,
          );
    if (plan.checkpointId !== undefined) {
      history?.record({
        kind: "restored",
        jobId: this.jobId,
        scope,
        checkpointId: plan.checkpointId,
        at: Date.now(),
        lineage: plan.lineage,
        incarnation,
      });
    }
    const named = plan.started?.request;
    if (plan.newerCheckpointId !== undefined && named !== undefined && named !== "none") {
      this.logger.warn(
        { checkpointId: named.checkpointId, newestCheckpointId: plan.newerCheckpointId },
        `restoring checkpoint ${named.checkpointId} although checkpoint ${plan.newerCheckpointId} is newer: the output committed after checkpoint ${named.checkpointId} is produced again (duplicates in the sinks) and state goes back`,
      );
    }
    const subtasks: AttemptSubtask[] = [];
    let failAttempt!: (error: unknown) => void;
    const failed = new Promise<never>((_, reject) => {
      failAttempt = reject;
    });
    failed.catch(() => undefined);
    const coordinatorRef: { current?: CheckpointCoordinator } = {};
    const loops: Promise<void>[] = [];
    try {
      // The subtasks of this process start side by side (their connectors connect, restore and
      // clean up at the same time, as they do in separate processes or threads): one after another,
      // each waited for the previous one, and for the prefetching of those already started. Those
      // that did start are closed by shutdown() when another one fails.
      const host = this.host;
      if (host !== undefined) {
        subtasks.push(
          ...(await host.start({
            attemptNumber,
            incarnation,
            restoredCheckpointId: plan.checkpointId,
            restoredOf: (subtaskIndex) => plan.operatorsOf(subtaskIndex),
          })),
        );
      }
      const localSubtasks: Subtask[] = [];
      const local: SubtaskOperators =
        host !== undefined
          ? { operatorsOf: new Map(), exchange: undefined }
          : createLocalOperators(
              this.nodes(),
              this.localSubtasks,
              (subtaskIndex) => this.creationContext(subtaskIndex),
              (subtaskIndex) =>
                localSubtasks.find((subtask) => subtask.index === subtaskIndex)?.workArrived(),
            );
      const created = await Promise.allSettled(
        (host === undefined ? this.localSubtasks : []).map((subtaskIndex) =>
          this.createSubtask(
            subtaskIndex,
            attemptNumber,
            incarnation,
            plan.checkpointId,
            plan.operatorsOf(subtaskIndex),
            local,
            incarnationSeries,
          ),
        ),
      );
      for (const result of created) if (result.status === "fulfilled") localSubtasks.push(result.value);
      subtasks.push(...localSubtasks);
      const firstFailure = created.find((result) => result.status === "rejected");
      if (firstFailure !== undefined) throw firstFailure.reason;
      const checkpointing = resolveCheckpointing(this.options.checkpointing);
      const coordinator = new CheckpointCoordinator({
        jobId: this.jobId,
        scope,
        parallelism: this.parallelism,
        subtasks,
        storage,
        checkpointing,
        // Never reuse an id this process already used, even one whose store was fenced.
        lastCheckpointId: Math.max(plan.highestStoredId, attempts.lastCheckpointId),
        incarnation,
        lineage: plan.lineage,
        describe: (states) => this.describeCheckpoint(states),
        logger: this.logger,
        metrics: this.metrics,
        onFailure: failAttempt,
        ...(history === undefined ? {} : { history }),
        onCompleted: (checkpointId, completedAt) =>
          this.tracker.checkpointCompleted(checkpointId, completedAt),
      });
      coordinatorRef.current = coordinator;
      this.coordinator = coordinator;
      for (const subtask of subtasks) loops.push(subtask.run().catch((error: unknown) => failAttempt(error)));
      coordinator.start();
      this.tracker.running(plan.checkpointId, () => subtasks.map((subtask) => subtask.liveness()));
      const stopped = new Promise<"stop">((resolve) => {
        this.requestStop = () => resolve("stop");
        if (this.stopRequested) resolve("stop");
      });
      const inputEnded = Promise.all(subtasks.map((subtask) => subtask.whenInputEnded())).then(
        () => "end-of-input" as const,
      );
      const endedBy = await Promise.race([inputEnded, stopped, failed]);
      this.inputEnded = endedBy === "end-of-input";
      this.tracker.enter("stopping");
      if (endedBy === "stop")
        await Promise.race([Promise.all(subtasks.map((subtask) => subtask.stopReading())), failed]);
      const lastCheckpointId = await Promise.race([coordinator.finalCheckpoint(), failed]);
      this.logger.info({ endedBy, lastCheckpointId }, "job finished");
      await this.shutdown(subtasks, loops, coordinator);
      return { endedBy, lastCheckpointId, restoredCheckpointId: plan.checkpointId };
    } catch (error) {
      await this.shutdown(subtasks, loops, coordinatorRef.current);
      throw error;
    } finally {
      // What is still being recorded of the history lands before the attempt ends (never fails).
      await history?.flush();
      this.tracker.attemptEnded();
      this.requestStop = undefined;
      this.coordinator = undefined;
      const coordinator = coordinatorRef.current;
      if (coordinator !== undefined) {
        attempts.incarnation = coordinator.currentIncarnation;
        attempts.lastCheckpointId = Math.max(attempts.lastCheckpointId, coordinator.latestCheckpointId);
      }
    }
  }

  /** Says what `restore: "none"` or a named checkpoint did: started a lineage, or was applied before. */
  private logStartRequest(plan: RestorePlan): void {
    if (plan.started !== undefined) {
      const { request, derivedFrom } = plan.started;
      this.logger.info(
        { restore: request, lineage: plan.lineage, baseCheckpointId: plan.lineage, derivedFrom },
        request === "none"
          ? `restore "none": starting empty as lineage ${plan.lineage} (its empty base checkpoint ${plan.lineage} records the fresh start); processes started later with the same setting go on from this lineage's latest checkpoint`
          : `restoring checkpoint ${request.checkpointId} as lineage ${plan.lineage}: base checkpoint ${plan.lineage} holds every subtask's state at checkpoint ${request.checkpointId} and records the restore; processes started later with the same setting go on from this lineage's latest checkpoint instead of going back to checkpoint ${request.checkpointId}`,
      );
    }
    if (plan.alreadyApplied !== undefined) {
      const { request, baseCheckpointId } = plan.alreadyApplied;
      this.logger.info(
        { restore: request, lineage: plan.lineage, baseCheckpointId, checkpointId: plan.checkpointId },
        `${describeStartRequest(request)} skipped: it was applied already (lineage ${baseCheckpointId} started from it), so this process goes on from ${plan.checkpointId === undefined ? "empty state in that lineage (none of its checkpoints is for this process yet)" : `checkpoint ${plan.checkpointId}, the latest of that lineage for this process`}. To apply it again, restore that lineage's base checkpoint ${baseCheckpointId} by its id`,
      );
    }
  }

  private async shutdown(
    subtasks: readonly AttemptSubtask[],
    loops: readonly Promise<void>[],
    coordinator: CheckpointCoordinator | undefined,
  ): Promise<void> {
    coordinator?.stop();
    // Learn the fate of a checkpoint in flight, so that what it alone carried can be given up.
    await coordinator?.settle();
    for (const subtask of subtasks) subtask.terminate();
    await Promise.allSettled(loops);
    // Closing commits what the last stored checkpoint holds if an operator was not told yet (a
    // failed job must not keep its locks), and aborts open transactions and those only failed
    // checkpoints carried.
    const failed = coordinator?.failedCheckpointIds ?? [];
    const stored = coordinator?.lastStoredCheckpointId ?? 0;
    for (const subtask of subtasks) await subtask.close(failed, stored);
  }

  /** The series the attempt's incarnation is numbered in, for connectors that keep incarnations outside the storage. */
  private async incarnationSeriesOf(storage: CheckpointStorage): Promise<IncarnationSeriesContext> {
    const { series } = await storage.describeIncarnations(this.jobId);
    const jobId = this.jobId;
    return { series, newestIncarnation: async () => (await storage.describeIncarnations(jobId)).newest };
  }

  private async planRestore(
    scope: string,
    incarnation: number,
    runsAllSubtasks: boolean,
    setting: RestoreSetting,
  ): Promise<RestorePlan> {
    const sources = new Map(
      this.nodes().flatMap((node) => (node.source ? [[node.uid, node.source] as const] : [])),
    );
    if (!this.storage || !this.options.checkpointing) {
      return {
        checkpointId: undefined,
        highestStoredId: 0,
        lineage: 0,
        restoredFrom: [],
        operatorsOf: () => undefined,
      };
    }
    const plan = await planRestore({
      storage: this.storage,
      jobId: this.jobId,
      scope,
      incarnation,
      shape: { parallelism: this.parallelism, runsAllSubtasks },
      claimRedistributed: (perSubtask, from) => claimRedistributedState(this.stateClaims(), perSubtask, from),
      refuseUnclaimed: (perSubtask, from) => {
        // Allowed, nothing is refused; the drop (and its warning) happens once, on the final state.
        if (!this.stateClaims().allowNonRestoredState) {
          claimRedistributedState(this.stateClaims(), perSubtask, from);
        }
      },
      setting,
      sources,
    });
    // Before any operator starts: state that no operator claims is refused, or dropped if allowed.
    checkStateClaims({
      ...this.stateClaims(),
      checkpointId: plan.checkpointId,
      restored: new Map(this.localSubtasks.map((index) => [index, plan.operatorsOf(index)])),
    });
    return plan;
  }

  /** What the state claims on restore are checked against: the job's uids and its option. */
  private stateClaims(): {
    jobId: string;
    claimedUids: string[];
    allowNonRestoredState: boolean;
    logger: Logger;
  } {
    return {
      jobId: this.jobId,
      claimedUids: this.nodes().map((node) => node.uid),
      allowNonRestoredState: this.options.allowNonRestoredState === true,
      logger: this.logger,
    };
  }

  private async createSubtask(
    subtaskIndex: number,
    attemptNumber: number,
    incarnation: number,
    restoredCheckpointId: number | undefined,
    restored: Record<string, OperatorSnapshot> | undefined,
    local: SubtaskOperators,
    incarnationSeries?: IncarnationSeriesContext,
  ): Promise<Subtask> {
    const logger = this.logger.child({ subtask: subtaskIndex });
    const operators = local.operatorsOf.get(subtaskIndex)!;
    const loopMetrics = new SubtaskLoopMetrics(this.metrics, this.jobId, subtaskIndex, operators);
    const environment = {
      jobId: this.jobId,
      subtaskIndex,
      parallelism: this.parallelism,
      attemptNumber,
      incarnation,
      ...(incarnationSeries === undefined ? {} : { incarnationSeries }),
      logger,
      metrics: this.metrics,
      restoredCheckpointId,
      checkpointingInterval: this.options.checkpointing ? this.options.checkpointing.interval : undefined,
      loopMetrics,
    };
    // A subtask that fails to start is never closed by shutdown(): close here what did start, so
    // that their open transactions are aborted and their connections released (a sink's
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

  /** The operators as this process runs them. */
  private nodes(): readonly StreamNode[] {
    return this.executionNodes ?? this.graph.nodes;
  }

  // One process per subtask with a keyBy: the exchange between processes is cut into the graph.
  private resolveExecutionNodes(): readonly StreamNode[] {
    const exchange = this.options.exchange;
    const nodes = this.graph.nodes;
    // At parallelism 1 too: a rescale to 1 must still commit and read what is in the exchange.
    if (exchange === undefined || this.options.subtaskIndex === undefined) return nodes;
    if (!nodes.some((node) => node.exchange !== undefined)) return nodes;
    if (!this.options.checkpointing) {
      throw new ConfigurationError(
        "exchange",
        `(${exchange.name}) writes exactly once, with transactions committed by checkpoints; turn checkpointing on, e.g. \`checkpointing: { interval: 1000 }\``,
      );
    }
    return crossProcessNodes(nodes, exchange, {
      jobId: this.jobId,
      maxParallelism: this.maxParallelism,
      parallelism: this.parallelism,
    });
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
    if (checkpointing.storage === "memory") return new MemoryCheckpointStorage();
    return checkpointing.storage ?? filesystem(".onceflow/checkpoints");
  }

  // A readable summary for `onceflow checkpoints inspect`: operators and source positions.
  private describeCheckpoint(states: ReadonlyMap<number, Buffer>): Record<string, unknown> {
    const splits: Record<string, unknown> = {};
    for (const [subtaskIndex, bytes] of states) {
      const snapshot = deserialize(bytes) as SubtaskSnapshot;
      for (const [uid, operator] of Object.entries(snapshot.operators)) {
        const source = this.nodes().find((node) => node.uid === uid)?.source;
        for (const entry of operator.splits ?? []) {
          const split = source?.splitSerializer
            ? source.splitSerializer.deserialize(entry.bytes)
            : deserialize(entry.bytes);
          splits[entry.splitKey] = { subtask: subtaskIndex, ...toJsonSafe(split) };
        }
      }
    }
    return {
      operators: this.nodes().map((node) => ({ uid: node.uid, kind: node.kind })),
      splits,
      // Tells a later run that restores this checkpoint that its bounded input had ended.
      ...(this.inputEnded ? { endedBy: "end-of-input" } : {}),
    };
  }

  private warnResumedAtEndOfInput(checkpointId: number | undefined): void {
    this.logger.warn(
      { checkpointId },
      `the job restored checkpoint ${checkpointId}, the final checkpoint of a run whose input had ended, and its input ended again: bounded sources resumed at their end, so nothing was read again. To run the job from the start, use a new jobId or empty checkpoint storage, or start it once with restore: "none" (applied once: a process started again with "none" goes on from that fresh start's latest checkpoint)`,
    );
  }

  private installSignalHandlers(): () => void {
    const onSignal = (signal: NodeJS.Signals): void => {
      this.logger.info({ signal }, "stopping with a final checkpoint");
      this.stop();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    return () => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    };
  }
}

/** What one `execute()` carries from attempt to attempt. */
interface AttemptLineage {
  /** The incarnation the last attempt held: the next one claims after it. */
  incarnation: number | undefined;
  /** The highest checkpoint id any attempt triggered. */
  lastCheckpointId: number;
  /** Whether the first attempt restored the final checkpoint of a run whose input had ended. */
  firstRestoredFinal?: boolean;
  /** What the first attempt that planned its restore restored (also when it failed later). */
  firstRestoredCheckpointId: number | undefined;
  /** An attempt planned its restore: `restore` was applied (or skipped), later attempts restore "latest". */
  planned: boolean;
}

/**
 * The failure a restart cannot fix, if any: the error itself or one in its `cause` chain with a
 * permanent code (a user function may wrap the sink's RECORD_REJECTED, for example).
 */
function permanentFailureIn(error: unknown): OnceflowError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (isOnceflowError(current) && PERMANENT_CODES.has(current.code)) return current;
    current = current.cause;
  }
  return undefined;
}

function toJsonSafe(value: unknown): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify(value, (_key, item) => (typeof item === "bigint" ? item.toString() : item)),
  );
}

function resolveCheckpointing(
  options: CheckpointingOptions | false | undefined,
): ResolvedCheckpointing | undefined {
  if (!options) return undefined;
  return {
    interval: options.interval,
    initialDelay: options.initialDelay ?? defaultInitialDelay(options.interval),
    timeout: options.timeout ?? 600_000,
    minPauseBetween: options.minPauseBetween ?? 0,
    tolerableFailures: options.tolerableFailures ?? 0,
    retained: options.retained ?? 3,
    history: options.history ?? DEFAULT_CHECKPOINT_HISTORY_SIZE,
  };
}
