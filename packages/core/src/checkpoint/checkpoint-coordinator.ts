import { CheckpointError } from "../errors/onceflow-error.js";
import type { Logger } from "../observability/logger.js";
import { MetricNames, type Metrics } from "../observability/metrics.js";
import type { Subtask } from "../runtime/subtask.js";
import type { CheckpointStorage } from "./checkpoint-storage.js";
import { createCompletedCheckpoint } from "./completed-checkpoint.js";
import { retainLatestCheckpoints } from "./retention.js";

/** Checkpointing settings with every default filled in. */
export interface ResolvedCheckpointing {
  readonly interval: number;
  readonly timeout: number;
  readonly minPauseBetween: number;
  readonly tolerableFailures: number;
  readonly retained: number;
}

export interface CheckpointCoordinatorOptions {
  readonly jobId: string;
  readonly scope: string;
  readonly parallelism: number;
  readonly subtasks: readonly Subtask[];
  /** Undefined when checkpointing is off: then only the final commit at the end runs (nothing stored). */
  readonly storage: CheckpointStorage | undefined;
  readonly checkpointing: ResolvedCheckpointing | undefined;
  /** Ids continue after this one (the restored or newest stored checkpoint). */
  readonly lastCheckpointId: number;
  /** A short summary of operators for the metadata, as `onceflow checkpoints inspect` shows it. */
  readonly describe: (subtaskStates: ReadonlyMap<number, Buffer>) => Record<string, unknown>;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Called when checkpointing fails beyond `tolerableFailures`: the attempt must fail. */
  readonly onFailure: (error: unknown) => void;
}

/**
 * Triggers checkpoints on every subtask of this process, stores the completed ones atomically,
 * keeps the last N, and tells every operator when one completed — Flink's `CheckpointCoordinator`,
 * with at most one checkpoint in flight.
 */
export class CheckpointCoordinator {
  private lastCheckpointId: number;
  private inFlight: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private consecutiveFailures = 0;
  private lastCompletedAt = 0;
  private readonly durations;
  private readonly sizes;
  private readonly lastCompleted;
  private readonly failures;

  constructor(private readonly options: CheckpointCoordinatorOptions) {
    this.lastCheckpointId = options.lastCheckpointId;
    this.durations = options.metrics.histogram(MetricNames.checkpointDurationMs, "Checkpoint duration (ms)");
    this.sizes = options.metrics.histogram(MetricNames.checkpointSizeBytes, "Checkpoint size (bytes)");
    this.lastCompleted = options.metrics.gauge(
      MetricNames.lastCompletedCheckpointId,
      "Last completed checkpoint",
    );
    this.failures = options.metrics.counter(MetricNames.checkpointFailures, "Failed checkpoints");
  }

  /** The id of the last checkpoint triggered. */
  get latestCheckpointId(): number {
    return this.lastCheckpointId;
  }

  /** Starts periodic checkpoints (no-op when checkpointing is off). */
  start(): void {
    if (this.options.checkpointing) this.schedule(this.options.checkpointing.interval);
  }

  /** Stops triggering; a checkpoint in flight runs to its end. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /**
   * Takes the last checkpoint (end of input or stop) and waits until every operator was told it
   * completed, so the last transactions are committed. With checkpointing off, the snapshot and
   * the commit run without storing anything.
   */
  async finalCheckpoint(): Promise<number> {
    this.stop();
    await this.inFlight?.catch(() => undefined);
    const checkpointId = ++this.lastCheckpointId;
    await this.runCheckpoint(checkpointId, true);
    await this.notifyComplete(checkpointId);
    return checkpointId;
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.triggerPeriodic(), delay);
    this.timer.unref?.();
  }

  private triggerPeriodic(): void {
    if (this.stopped || this.inFlight) return;
    const checkpointing = this.options.checkpointing!;
    const triggeredAt = Date.now();
    const checkpointId = ++this.lastCheckpointId;
    this.inFlight = this.runCheckpoint(checkpointId, false)
      .then(() => {
        this.consecutiveFailures = 0;
        // A failed commit fails the subtask loop itself, which fails the attempt.
        this.notifyComplete(checkpointId).catch(() => undefined);
      })
      .catch((error: unknown) => this.handleFailure(checkpointId, error))
      .finally(() => {
        this.inFlight = undefined;
        const sinceTrigger = Date.now() - triggeredAt;
        const sinceCompletion = Date.now() - this.lastCompletedAt;
        this.schedule(
          Math.max(checkpointing.interval - sinceTrigger, checkpointing.minPauseBetween - sinceCompletion, 0),
        );
      });
  }

  private handleFailure(checkpointId: number, error: unknown): void {
    this.failures.inc(1, { job: this.options.jobId });
    this.consecutiveFailures++;
    const tolerable = this.options.checkpointing?.tolerableFailures ?? 0;
    this.options.logger.warn(
      { checkpointId, error: String(error), consecutiveFailures: this.consecutiveFailures },
      "checkpoint failed",
    );
    for (const subtask of this.options.subtasks) {
      subtask.notifyCheckpointAborted(checkpointId).catch(() => undefined);
    }
    if (this.consecutiveFailures > tolerable) {
      this.stop();
      this.options.onFailure(
        new CheckpointError(
          "CHECKPOINT_FAILED",
          `checkpoint ${checkpointId} failed and ${this.consecutiveFailures} failures in a row exceed checkpointing.tolerableFailures (${tolerable}): ${String(error instanceof Error ? error.message : error)}`,
          { checkpointId, cause: error },
        ),
      );
    }
  }

  // The timeout covers the snapshots and the store: a checkpoint is not complete before it is durable.
  private runCheckpoint(checkpointId: number, isFinal: boolean): Promise<void> {
    return withTimeout(
      this.takeCheckpoint(checkpointId, isFinal),
      this.options.checkpointing?.timeout,
      checkpointId,
    );
  }

  private async takeCheckpoint(checkpointId: number, isFinal: boolean): Promise<void> {
    const { subtasks, storage, checkpointing, parallelism } = this.options;
    const triggeredAt = Date.now();
    const states = await Promise.all(
      subtasks.map((subtask) =>
        subtask.triggerCheckpoint({ checkpointId, checkpointTimestamp: triggeredAt, isFinal }, parallelism),
      ),
    );
    const subtaskStates = new Map<number, Buffer>();
    for (const [position, subtask] of subtasks.entries()) subtaskStates.set(subtask.index, states[position]!);
    if (storage && checkpointing) {
      const checkpoint = createCompletedCheckpoint({
        jobId: this.options.jobId,
        checkpointId,
        scope: this.options.scope,
        parallelism,
        subtaskStates,
        triggeredAt,
        isFinal,
        summary: this.options.describe(subtaskStates),
      });
      const { metadata } = checkpoint;
      await storage.store(checkpoint);
      const bytes = metadata.subtasks.reduce((total, entry) => total + entry.stateBytes, 0);
      this.lastCompletedAt = Date.now();
      this.durations.observe(this.lastCompletedAt - triggeredAt, { job: this.options.jobId });
      this.sizes.observe(bytes, { job: this.options.jobId });
      this.lastCompleted.set(checkpointId, { job: this.options.jobId });
      this.options.logger.info(
        { checkpointId, durationMs: this.lastCompletedAt - triggeredAt, bytes, isFinal },
        "checkpoint completed",
      );
      await retainLatestCheckpoints(storage, this.options.jobId, checkpointing.retained, {
        scope: this.options.scope,
      });
    }
  }

  // The checkpoint is durable: now (and only now) sinks may commit and sources may commit offsets.
  private async notifyComplete(checkpointId: number): Promise<void> {
    await Promise.all(this.options.subtasks.map((subtask) => subtask.notifyCheckpointComplete(checkpointId)));
  }
}

async function withTimeout<T>(
  promise: Promise<T>,
  timeout: number | undefined,
  checkpointId: number,
): Promise<T> {
  if (timeout === undefined) return promise;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new CheckpointError(
            "CHECKPOINT_FAILED",
            `checkpoint ${checkpointId} did not complete within ${timeout} ms`,
            {
              checkpointId,
            },
          ),
        ),
      timeout,
    );
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
