import { CheckpointCoordinator } from "../checkpoint/checkpoint-coordinator.js";
import { DEFAULT_CHECKPOINT_HISTORY_SIZE } from "../checkpoint/checkpoint-history-entries.js";
import { CheckpointHistoryRecorder } from "../checkpoint/checkpoint-history-recorder.js";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { resolveCheckpointing } from "../checkpoint/resolve-checkpointing.js";
import { checkpointSummaryOf } from "./checkpoint-summary.js";
import { createSubtask, incarnationSeriesOf, type SubtaskJob } from "./create-subtask.js";
import { createLocalOperators } from "./exchange/local-exchange.js";
import type { JobOptions } from "./job-options.js";
import type { JobResult } from "./job-result.js";
import type { JobStatusTracker } from "./job-status.js";
import {
  logRestorePlan,
  planAttemptRestore,
  restoresEndedInput,
  warnIfNewerCheckpointExists,
} from "./restore/attempt-restore.js";
import { scopeOf } from "./restore/lineage.js";
import type { OperatorCreationContext, StreamNode } from "./stream-graph.js";
import type { AttemptSubtask, Subtask } from "./subtask.js";
import type { SubtaskHost, SubtaskOperators } from "./subtask-host.js";

/**
 * What an attempt needs of its job: what its subtasks are started with, the options, the subtasks
 * of this process, the operators as this process runs them, and whether a stop was requested.
 *
 * @example
 * ```ts
 * const attempt = new JobAttempt(attemptingJob, 0, lineageOfAttempts);
 * ```
 */
export interface AttemptingJob extends SubtaskJob {
  readonly options: JobOptions;
  /** The subtasks this process runs. */
  readonly localSubtasks: readonly number[];
  /** The checkpoint storage, undefined with checkpointing off. */
  readonly storage: CheckpointStorage | undefined;
  /** Runs the subtasks elsewhere (worker threads) while this job coordinates them. */
  readonly host: SubtaskHost | undefined;
  /** The graph as this process runs it (with the exchange between processes cut in). */
  readonly nodes: readonly StreamNode[];
  readonly tracker: JobStatusTracker;
  creationContext(subtaskIndex: number): OperatorCreationContext;
  /** Whether `stop()` was called (also before this attempt began). */
  stopRequested(): boolean;
}

/**
 * What one `execute()` carries from attempt to attempt.
 *
 * @example
 * ```ts
 * const lineageOfAttempts: AttemptLineage = { incarnation: undefined, lastCheckpointId: 0, firstRestoredCheckpointId: undefined, planned: false };
 * ```
 */
export interface AttemptLineage {
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
 * How an attempt that did not fail ended.
 *
 * @example
 * ```ts
 * const { endedBy, lastCheckpointId } = await attempt.run();
 * ```
 */
export interface AttemptOutcome {
  readonly endedBy: JobResult["endedBy"];
  readonly lastCheckpointId: number;
  readonly restoredCheckpointId: number | undefined;
}

/**
 * One attempt of a job's run: claims the incarnation, plans and logs the restore, starts the
 * subtasks (here, or through the job's host), coordinates checkpoints until the input ends, a stop
 * or a failure, takes the final checkpoint and shuts down. A failure rejects `run()` after the
 * shutdown; the job decides whether to restart.
 *
 * @example
 * ```ts
 * const attempt = new JobAttempt(attemptingJob, attemptNumber, lineageOfAttempts);
 * const outcome = await attempt.run();
 * ```
 */
export class JobAttempt {
  private runningCoordinator: CheckpointCoordinator | undefined;
  /** Set once the attempt's input ended: its final checkpoint says so in its summary. */
  private inputEnded = false;
  private stopAttempt: (() => void) | undefined;

  constructor(
    private readonly job: AttemptingJob,
    private readonly attemptNumber: number,
    private readonly attempts: AttemptLineage,
  ) {}

  /**
   * The attempt's checkpoint coordinator, from the moment it exists until the attempt ends (what
   * `job.triggerCheckpoint()` triggers through).
   *
   * @example
   * ```ts
   * const checkpointId = await attempt.coordinator?.triggerCheckpoint();
   * ```
   */
  get coordinator(): CheckpointCoordinator | undefined {
    return this.runningCoordinator;
  }

  /**
   * Stops the running attempt with a final checkpoint; nothing before it runs or after it ended
   * (an attempt that starts later sees `stopRequested()`).
   *
   * @example
   * ```ts
   * attempt.requestStop();
   * ```
   */
  requestStop(): void {
    this.stopAttempt?.();
  }

  /**
   * Runs the attempt to its end, and rejects with its failure after shutting it down.
   *
   * @example
   * ```ts
   * const { endedBy, lastCheckpointId, restoredCheckpointId } = await attempt.run();
   * ```
   */
  async run(): Promise<AttemptOutcome> {
    const { job, attemptNumber, attempts } = this;
    const { jobId, options, logger, tracker } = job;
    this.inputEnded = false;
    const runsAll = options.subtaskIndex === undefined;
    const scope = scopeOf(options.subtaskIndex ?? 0, job.parallelism, runsAll);
    const storage = job.storage;
    // One live incarnation per scope: claim before restoring. A restart claims after its own
    // previous incarnation, so a process that was replaced meanwhile stops (SUPERSEDED) instead
    // of fencing its replacement in turn.
    const incarnation =
      storage === undefined
        ? 0
        : await storage.claimIncarnation(
            jobId,
            scope,
            attempts.incarnation === undefined ? {} : { after: attempts.incarnation },
          );
    attempts.incarnation = incarnation;
    const incarnationSeries = storage === undefined ? undefined : await incarnationSeriesOf(storage, jobId);
    tracker.restoring(attemptNumber);
    // `restore` names where the job starts; a restart goes on from the latest checkpoint (Flink's
    // failover after a savepoint restore), never back to the named one — unless no attempt got as far
    // as planning its restore: then the setting is not applied yet (a restore applied already is
    // skipped anyway, its lineage records it).
    const plan = await planAttemptRestore(
      {
        jobId,
        storage,
        parallelism: job.parallelism,
        localSubtasks: job.localSubtasks,
        nodes: job.nodes,
        allowNonRestoredState: options.allowNonRestoredState === true,
        logger,
      },
      {
        scope,
        incarnation,
        runsAllSubtasks: runsAll,
        setting: attempts.planned ? "latest" : (options.restore ?? "latest"),
      },
    );
    if (!attempts.planned) {
      attempts.firstRestoredCheckpointId = plan.checkpointId;
      attempts.firstRestoredFinal = restoresEndedInput(plan);
    }
    attempts.planned = true;
    logRestorePlan(logger, plan, incarnation);
    const history =
      storage === undefined
        ? undefined
        : new CheckpointHistoryRecorder(
            storage,
            resolveCheckpointing(options.checkpointing)?.history ?? DEFAULT_CHECKPOINT_HISTORY_SIZE,
            logger,
          );
    if (plan.checkpointId !== undefined) {
      history?.record({
        kind: "restored",
        jobId,
        scope,
        checkpointId: plan.checkpointId,
        at: Date.now(),
        lineage: plan.lineage,
        incarnation,
      });
    }
    warnIfNewerCheckpointExists(logger, plan);
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
      const host = job.host;
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
              job.nodes,
              job.localSubtasks,
              (subtaskIndex) => job.creationContext(subtaskIndex),
              (subtaskIndex) =>
                localSubtasks.find((subtask) => subtask.index === subtaskIndex)?.workArrived(),
            );
      const created = await Promise.allSettled(
        (host === undefined ? job.localSubtasks : []).map((subtaskIndex) =>
          createSubtask(job, {
            subtaskIndex,
            attemptNumber,
            incarnation,
            restoredCheckpointId: plan.checkpointId,
            restored: plan.operatorsOf(subtaskIndex),
            local,
            ...(incarnationSeries === undefined ? {} : { incarnationSeries }),
          }),
        ),
      );
      for (const result of created) if (result.status === "fulfilled") localSubtasks.push(result.value);
      subtasks.push(...localSubtasks);
      const firstFailure = created.find((result) => result.status === "rejected");
      if (firstFailure !== undefined) throw firstFailure.reason;
      const checkpointing = resolveCheckpointing(options.checkpointing);
      const coordinator = new CheckpointCoordinator({
        jobId,
        scope,
        parallelism: job.parallelism,
        subtasks,
        storage,
        checkpointing,
        // Never reuse an id this process already used, even one whose store was fenced.
        lastCheckpointId: Math.max(plan.highestStoredId, attempts.lastCheckpointId),
        incarnation,
        lineage: plan.lineage,
        describe: (states) => checkpointSummaryOf(states, job.nodes, this.inputEnded),
        logger,
        metrics: job.metrics,
        onFailure: failAttempt,
        ...(history === undefined ? {} : { history }),
        onCompleted: (checkpointId, completedAt) => tracker.checkpointCompleted(checkpointId, completedAt),
      });
      coordinatorRef.current = coordinator;
      this.runningCoordinator = coordinator;
      for (const subtask of subtasks) loops.push(subtask.run().catch((error: unknown) => failAttempt(error)));
      coordinator.start();
      tracker.running(plan.checkpointId, () => subtasks.map((subtask) => subtask.liveness()));
      const stopped = new Promise<"stop">((resolve) => {
        this.stopAttempt = () => resolve("stop");
        if (job.stopRequested()) resolve("stop");
      });
      const inputEnded = Promise.all(subtasks.map((subtask) => subtask.whenInputEnded())).then(
        () => "end-of-input" as const,
      );
      const endedBy = await Promise.race([inputEnded, stopped, failed]);
      this.inputEnded = endedBy === "end-of-input";
      tracker.enter("stopping");
      if (endedBy === "stop")
        await Promise.race([Promise.all(subtasks.map((subtask) => subtask.stopReading())), failed]);
      const lastCheckpointId = await Promise.race([coordinator.finalCheckpoint(), failed]);
      logger.info({ endedBy, lastCheckpointId }, "job finished");
      await shutdown(subtasks, loops, coordinator);
      return { endedBy, lastCheckpointId, restoredCheckpointId: plan.checkpointId };
    } catch (error) {
      await shutdown(subtasks, loops, coordinatorRef.current);
      throw error;
    } finally {
      // What is still being recorded of the history lands before the attempt ends (never fails).
      await history?.flush();
      tracker.attemptEnded();
      this.stopAttempt = undefined;
      this.runningCoordinator = undefined;
      const coordinator = coordinatorRef.current;
      if (coordinator !== undefined) {
        attempts.incarnation = coordinator.currentIncarnation;
        attempts.lastCheckpointId = Math.max(attempts.lastCheckpointId, coordinator.latestCheckpointId);
      }
    }
  }
}

/** Ends an attempt: the checkpoint in flight settles, the subtasks stop and close. */
async function shutdown(
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
