import { CheckpointError, ConfigurationError, isOnceflowError } from "../errors/onceflow-error.js";
import type { Logger } from "../observability/logger.js";
import { MetricNames, type Metrics } from "../observability/metrics.js";
import type { AttemptSubtask, SubtaskCheckpointShare } from "../runtime/subtask.js";
import type { CompletedCheckpointEntry } from "./checkpoint-history-entries.js";
import type { CheckpointHistoryRecorder } from "./checkpoint-history-recorder.js";
import {
  CheckpointPhaseMetrics,
  type CheckpointPhases,
  roundPhases,
  snapshotPhasesOf,
} from "./checkpoint-phases.js";
import type { CheckpointStorage } from "./checkpoint-storage.js";
import { createCompletedCheckpoint } from "./completed-checkpoint.js";
import { ScopeRetention } from "./scope-retention.js";

/** Checkpointing settings with every default filled in. */
export interface ResolvedCheckpointing {
  readonly interval: number;
  /** Milliseconds from `start()` to the first checkpoint. */
  readonly initialDelay: number;
  readonly timeout: number;
  readonly minPauseBetween: number;
  readonly tolerableFailures: number;
  readonly retained: number;
  /** How many history entries the storage keeps per scope. */
  readonly history: number;
}

export interface CheckpointCoordinatorOptions {
  readonly jobId: string;
  readonly scope: string;
  readonly parallelism: number;
  readonly subtasks: readonly AttemptSubtask[];
  /** Undefined when checkpointing is off: then only the final commit at the end runs (nothing stored). */
  readonly storage: CheckpointStorage | undefined;
  readonly checkpointing: ResolvedCheckpointing | undefined;
  /** Ids continue after this one (the highest stored or triggered so far). */
  readonly lastCheckpointId: number;
  /** The incarnation this attempt claimed for `scope`: stores are fenced on it. */
  readonly incarnation: number;
  /** The lineage the checkpoints belong to (see the restore planner). */
  readonly lineage: number;
  /** A short summary of operators for the metadata, as `onceflow checkpoints inspect` shows it. */
  readonly describe: (subtaskStates: ReadonlyMap<number, Buffer>) => Record<string, unknown>;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Called when checkpointing fails beyond `tolerableFailures`: the attempt must fail. */
  readonly onFailure: (error: unknown) => void;
  /** Where completed and failed checkpoints are recorded, when checkpointing is on. */
  readonly history?: CheckpointHistoryRecorder;
  /** Called when a checkpoint is stored (completed), with the time it completed (ms since the epoch). */
  readonly onCompleted?: (checkpointId: number, completedAt: number) => void;
}

/** A stored checkpoint's history entry and phases, until its commit and retention ran. */
interface StoredCheckpoint {
  readonly entry: Omit<CompletedCheckpointEntry, "phases">;
  readonly phases: CheckpointPhases;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** How long shutdown waits for a checkpoint in flight to settle, at most. */
const SETTLE_ON_SHUTDOWN_MS = 3_000;

/**
 * A checkpoint that did not complete. `definitive`: it can never become restorable (its snapshot
 * failed before anything was stored, or its store was fenced and did not land) — operators are told
 * with `notifyCheckpointAborted`. Otherwise its fate is unknown and nothing is told.
 */
class CheckpointFailure extends CheckpointError {
  constructor(
    checkpointId: number,
    message: string,
    readonly definitive: boolean,
    cause?: unknown,
    code: "CHECKPOINT_FAILED" | "SUPERSEDED" = "CHECKPOINT_FAILED",
  ) {
    super(code, message, { checkpointId, cause });
  }
}

/**
 * Triggers checkpoints on every subtask of this process, stores the completed ones atomically,
 * keeps the last N, and tells every operator when one completed — Flink's `CheckpointCoordinator`,
 * with at most one checkpoint in flight.
 *
 * A checkpoint is declared failed only once it can no longer become restorable: when its store
 * fails or times out, the coordinator claims a newer incarnation of its scope — which fences the
 * store still running — and then looks: a store that landed after all counts as completed (late),
 * one that did not is failed for good (invariant 2 in DESIGN.md).
 */
export class CheckpointCoordinator {
  private lastCheckpointId: number;
  private incarnation: number;
  private inFlight: Promise<number> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private consecutiveFailures = 0;
  private lastCompletedAt = 0;
  /** Checkpoints failed for good in this attempt: what nothing stored can reference. */
  private readonly definitelyFailed: number[] = [];
  private lastStored = 0;
  /** The checkpoint whose store is running, if any. */
  private storing: number | undefined;
  private storingIncarnation = 0;
  /** The checkpoint being taken (snapshots or store), and whether shutdown gave it up. */
  private taking: number | undefined;
  private abandoned = false;
  private readonly durations;
  private readonly sizes;
  private readonly lastCompleted;
  private readonly lastCompletedTimestamp;
  private readonly failures;
  private readonly phaseMetrics;
  private readonly retention: ScopeRetention | undefined;

  constructor(private readonly options: CheckpointCoordinatorOptions) {
    this.lastCheckpointId = options.lastCheckpointId;
    this.incarnation = options.incarnation;
    this.durations = options.metrics.histogram(
      MetricNames.checkpointDurationSeconds,
      "Checkpoint duration, from trigger until stored (seconds)",
    );
    this.sizes = options.metrics.histogram(MetricNames.checkpointSizeBytes, "Checkpoint size (bytes)");
    this.lastCompleted = options.metrics.gauge(
      MetricNames.lastCompletedCheckpointId,
      "Last completed checkpoint",
    );
    this.lastCompletedTimestamp = options.metrics.gauge(
      MetricNames.lastCompletedCheckpointTimestampSeconds,
      "When the last checkpoint completed (seconds since the epoch)",
    );
    this.failures = options.metrics.counter(MetricNames.checkpointFailures, "Failed checkpoints");
    this.failures.inc(0, { job: options.jobId });
    this.phaseMetrics = new CheckpointPhaseMetrics(options.metrics, options.jobId);
    if (options.storage && options.checkpointing) {
      this.retention = new ScopeRetention(
        options.storage,
        options.jobId,
        options.scope,
        options.checkpointing.retained,
      );
    }
  }

  /** The id of the last checkpoint triggered. */
  get latestCheckpointId(): number {
    return this.lastCheckpointId;
  }

  /** The newest incarnation this attempt holds (a store failure moves it on, see the class doc). */
  get currentIncarnation(): number {
    return this.incarnation;
  }

  /** Checkpoints of this attempt that failed for good, ascending. */
  get failedCheckpointIds(): readonly number[] {
    return this.definitelyFailed;
  }

  /** The last checkpoint this attempt stored (0 when none): sinks may commit up to it. */
  get lastStoredCheckpointId(): number {
    return this.lastStored;
  }

  /**
   * Starts periodic checkpoints (no-op when checkpointing is off): the first one `initialDelay` ms
   * from now, then one every `interval`. Called once every subtask of the attempt runs.
   */
  start(): void {
    if (this.options.checkpointing) this.schedule(this.options.checkpointing.initialDelay);
  }

  /** Stops triggering; a checkpoint in flight runs to its end. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /**
   * Triggers a checkpoint now (after the one in flight, if any) and resolves with its id once it
   * is stored and every operator was told it completed; rejects when it failed.
   */
  async triggerCheckpoint(): Promise<number> {
    if (!this.options.storage || !this.options.checkpointing) {
      throw new ConfigurationError("checkpointing", "is off: there is no checkpoint to trigger");
    }
    while (this.inFlight) await this.inFlight.catch(() => undefined);
    if (this.stopped) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        "the job is stopping: no checkpoint is triggered any more",
      );
    }
    if (this.timer) clearTimeout(this.timer);
    return this.startCheckpoint();
  }

  /**
   * Waits (a few seconds at most) for a checkpoint in flight to settle, so that shutdown knows
   * whether it was stored. Never rejects.
   */
  async settle(): Promise<void> {
    const inFlight = this.inFlight;
    if (inFlight === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      inFlight.catch(() => undefined),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SETTLE_ON_SHUTDOWN_MS);
      }),
    ]);
    clearTimeout(timer);
    if (this.inFlight === undefined) return;
    // Still running. A store (a slow or frozen storage): fence it and look, rather than leave its
    // transactions to a restart that may never come. Snapshots: the store will never start.
    if (this.storing !== undefined) await this.settleStore(this.storing);
    else if (this.taking !== undefined) {
      this.abandoned = true;
      this.markFailed(this.taking);
    }
  }

  /**
   * Takes the last checkpoint (end of input or stop) and waits until every operator was told it
   * completed, so the last transactions are committed. With checkpointing off, the snapshot and
   * the commit run without storing anything.
   */
  finalCheckpoint(): Promise<number> {
    this.stop();
    const previous = this.inFlight;
    const running = (async () => {
      await previous?.catch(() => undefined);
      const checkpointId = ++this.lastCheckpointId;
      let stored: StoredCheckpoint | undefined;
      try {
        stored = await this.runCheckpoint(checkpointId, true);
      } catch (error) {
        this.recordFailure(checkpointId, error);
        throw error;
      }
      await this.commitAndRetain(checkpointId, stored, (error) => this.recordFailure(checkpointId, error));
      return checkpointId;
    })();
    // Tracked from this very call on, like any other, so that shutdown settles it too.
    const tracked = running.finally(() => {
      if (this.inFlight === tracked) this.inFlight = undefined;
    });
    tracked.catch(() => undefined);
    this.inFlight = tracked;
    return running;
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.triggerPeriodic(), delay);
    this.timer.unref?.();
  }

  private triggerPeriodic(): void {
    if (this.stopped || this.inFlight) return;
    this.startCheckpoint().catch(() => undefined);
  }

  private startCheckpoint(): Promise<number> {
    const checkpointing = this.options.checkpointing!;
    const triggeredAt = performance.now();
    const checkpointId = ++this.lastCheckpointId;
    const running = this.runCheckpoint(checkpointId, false).then(
      async (stored) => {
        this.consecutiveFailures = 0;
        // A failed commit fails the subtask loop itself, which fails the attempt.
        await this.commitAndRetain(checkpointId, stored, (error) => this.handleFailure(checkpointId, error));
        return checkpointId;
      },
      (error: unknown) => {
        this.handleFailure(checkpointId, error);
        throw error;
      },
    );
    const tracked = running.finally(() => {
      if (this.inFlight === tracked) this.inFlight = undefined;
      const sinceTrigger = performance.now() - triggeredAt;
      const sinceCompletion = performance.now() - this.lastCompletedAt;
      this.schedule(
        Math.max(checkpointing.interval - sinceTrigger, checkpointing.minPauseBetween - sinceCompletion, 0),
      );
    });
    tracked.catch(() => undefined);
    this.inFlight = tracked;
    return running;
  }

  /**
   * Tells every operator the stored checkpoint completed (the commit), then discards what
   * `retained` no longer keeps, timing both; the checkpoint's history entry and phase metrics are
   * recorded once both ran (or one failed). `onRetainFailure` is called when retention failed.
   */
  private async commitAndRetain(
    checkpointId: number,
    stored: StoredCheckpoint | undefined,
    onRetainFailure: (error: unknown) => void,
  ): Promise<void> {
    const phases: Mutable<CheckpointPhases> = { ...stored?.phases } as CheckpointPhases;
    let recorded = false;
    const record = (): void => {
      if (recorded || stored === undefined) return;
      recorded = true;
      this.phaseMetrics.observe(phases);
      // Not awaited: the history is written after the checkpoint, never within it.
      this.options.history?.record({ ...stored.entry, phases: roundPhases(phases) });
    };
    try {
      let started = performance.now();
      await this.notifyComplete(checkpointId);
      phases.commitMs = performance.now() - started;
      started = performance.now();
      try {
        await this.retain();
      } catch (error) {
        record();
        onRetainFailure(error);
        throw error;
      }
      phases.retainMs = performance.now() - started;
    } finally {
      record();
    }
  }

  private recordFailure(checkpointId: number, error: unknown): boolean {
    this.failures.inc(1, { job: this.options.jobId });
    const definitive = error instanceof CheckpointFailure && error.definitive;
    if (definitive) this.markFailed(checkpointId);
    // Its store may have landed after all: retention must look at the storage again.
    else this.retention?.forget();
    this.options.history?.record({
      kind: "failed",
      jobId: this.options.jobId,
      scope: this.options.scope,
      checkpointId,
      at: Date.now(),
      reason: messageOf(error),
      definitive,
      incarnation: this.incarnation,
    });
    this.options.logger.warn(
      { checkpointId, err: error, definitive, consecutiveFailures: this.consecutiveFailures + 1 },
      definitive
        ? "checkpoint failed; it can never be restored"
        : "checkpoint failed; whether its store landed is unknown: a restart finds out",
    );
    return definitive;
  }

  private handleFailure(checkpointId: number, error: unknown): void {
    const definitive = this.recordFailure(checkpointId, error);
    this.consecutiveFailures++;
    const tolerable = this.options.checkpointing?.tolerableFailures ?? 0;
    // Only a checkpoint that can never be restored is reported aborted: sinks may then give up
    // what only it carried (see TwoPhaseCommitSink.close).
    if (definitive) {
      for (const subtask of this.options.subtasks) {
        subtask.notifyCheckpointAborted(checkpointId).catch(() => undefined);
      }
    }
    const superseded = isOnceflowError(error) && error.code === "SUPERSEDED";
    if (superseded || !definitive || this.consecutiveFailures > tolerable) {
      this.stop();
      this.options.onFailure(
        superseded
          ? error
          : new CheckpointError(
              "CHECKPOINT_FAILED",
              definitive
                ? `checkpoint ${checkpointId} failed and ${this.consecutiveFailures} failures in a row exceed checkpointing.tolerableFailures (${tolerable}): ${messageOf(error)}`
                : `checkpoint ${checkpointId} failed and whether it was stored is unknown, so this attempt cannot go on: ${messageOf(error)}`,
              { checkpointId, cause: error },
            ),
      );
    }
  }

  // The timeout covers the snapshots and the store: a checkpoint is not complete before it is durable.
  private async runCheckpoint(checkpointId: number, isFinal: boolean): Promise<StoredCheckpoint | undefined> {
    this.taking = checkpointId;
    try {
      return await this.takeCheckpoint(checkpointId, isFinal);
    } finally {
      if (this.taking === checkpointId) this.taking = undefined;
    }
  }

  private async takeCheckpoint(
    checkpointId: number,
    isFinal: boolean,
  ): Promise<StoredCheckpoint | undefined> {
    const { subtasks, storage, checkpointing, parallelism } = this.options;
    const triggeredAt = Date.now();
    const started = performance.now();
    const timeout = checkpointing?.timeout;
    const snapshots = Promise.all(
      subtasks.map((subtask) =>
        subtask.triggerCheckpoint({ checkpointId, checkpointTimestamp: triggeredAt, isFinal }, parallelism),
      ),
    );
    let shares: SubtaskCheckpointShare[];
    try {
      shares = await withTimeout(snapshots, timeout, checkpointId, "its snapshots");
    } catch (error) {
      // Nothing was handed to the storage, and nothing will be: failed for good.
      snapshots.catch(() => undefined);
      throw new CheckpointFailure(
        checkpointId,
        `checkpoint ${checkpointId}: ${messageOf(error)}`,
        true,
        error,
      );
    }
    if (!storage || !checkpointing) return undefined;
    if (this.abandoned) {
      // The attempt ended while the snapshots ran: never stored, so failed for good.
      throw new CheckpointFailure(
        checkpointId,
        `checkpoint ${checkpointId}: the attempt ended before its store`,
        true,
      );
    }
    const subtaskStates = new Map<number, Buffer>();
    for (const [position, subtask] of subtasks.entries())
      subtaskStates.set(subtask.index, shares[position]!.state);
    const checkpoint = createCompletedCheckpoint({
      jobId: this.options.jobId,
      checkpointId,
      scope: this.options.scope,
      parallelism,
      subtaskStates,
      triggeredAt,
      isFinal,
      incarnation: this.incarnation,
      lineage: this.options.lineage,
      summary: this.options.describe(subtaskStates),
    });
    const storeStarted = performance.now();
    const storing = storage.store(checkpoint);
    this.storing = checkpointId;
    this.storingIncarnation = this.incarnation;
    try {
      const remaining =
        timeout === undefined ? undefined : Math.max(1, timeout - (performance.now() - started));
      await withTimeout(storing, remaining, checkpointId, "its store");
    } catch (error) {
      storing.catch(() => undefined); // its outcome is settled by the fence below
      if (!(await this.fenceAndFind(checkpointId, error))) {
        // Fenced and not listed: it can never land.
        throw new CheckpointFailure(
          checkpointId,
          `checkpoint ${checkpointId} was not stored: ${messageOf(error)}`,
          true,
          error,
        );
      }
      this.options.logger.warn(
        { checkpointId, err: error },
        "checkpoint stored late; it counts as completed",
      );
    } finally {
      if (this.storing === checkpointId) this.storing = undefined;
    }
    const storeMs = performance.now() - storeStarted;
    this.lastStored = checkpointId;
    this.retention?.stored(checkpointId);
    const { metadata } = checkpoint;
    const bytes = metadata.subtasks.reduce((total, entry) => total + entry.stateBytes, 0);
    this.lastCompletedAt = performance.now();
    this.durations.observe((this.lastCompletedAt - started) / 1000, { job: this.options.jobId });
    this.sizes.observe(bytes, { job: this.options.jobId });
    this.lastCompleted.set(checkpointId, { job: this.options.jobId });
    const completedAt = Date.now();
    this.lastCompletedTimestamp.set(completedAt / 1000, { job: this.options.jobId });
    this.options.onCompleted?.(checkpointId, completedAt);
    this.options.logger.info(
      { checkpointId, durationMs: Math.round(this.lastCompletedAt - started), bytes, isFinal },
      "checkpoint completed",
    );
    return {
      entry: {
        kind: "completed",
        jobId: metadata.jobId,
        scope: metadata.scope,
        checkpointId,
        at: completedAt,
        triggeredAt,
        sizeBytes: bytes,
        parallelism,
        isFinal,
        lineage: this.options.lineage,
        ...(metadata.incarnation === undefined ? {} : { incarnation: metadata.incarnation }),
      },
      phases: { ...snapshotPhasesOf(shares), storeMs },
    };
  }

  /**
   * Discards what `retained` no longer keeps (listing the storage only the first time and after a
   * failure, see ScopeRetention). Runs once operators were told a checkpoint completed (its commits
   * wait for no discarding), within the checkpoint: the next one waits.
   */
  private async retain(): Promise<void> {
    await this.retention?.retain();
  }

  /**
   * After a store failed or timed out: claims a newer incarnation of the scope, which fences the
   * store if it still runs, then tells whether it landed. Throws (fate unknown) when the storage
   * cannot answer; `SUPERSEDED` when another process took the scope over meanwhile.
   */
  private async fenceAndFind(checkpointId: number, storeError: unknown): Promise<boolean> {
    const { storage, jobId, scope } = this.options;
    // Ours only: a newer process of the scope may have stored a checkpoint with the same id.
    const writtenBy = this.storing === checkpointId ? this.storingIncarnation : this.incarnation;
    if (isSuperseded(storeError)) {
      // Refused by the storage: never stored. A newer process owns the scope: this one stops.
      throw new CheckpointFailure(checkpointId, messageOf(storeError), true, storeError, "SUPERSEDED");
    }
    let supersededBy: unknown;
    try {
      this.incarnation = await storage!.claimIncarnation(jobId, scope, { after: this.incarnation });
    } catch (error) {
      if (!isSuperseded(error)) throw this.unknownFate(checkpointId, storeError, error);
      // A newer incarnation exists: it fenced the store as surely as our own claim would have.
      supersededBy = error;
    }
    let landed: boolean;
    try {
      const listed = await storage!.list(jobId);
      landed = listed.some(
        (metadata) =>
          metadata.scope === scope &&
          metadata.checkpointId === checkpointId &&
          (metadata.incarnation === undefined || metadata.incarnation === writtenBy),
      );
    } catch (error) {
      throw this.unknownFate(checkpointId, storeError, error);
    }
    if (supersededBy !== undefined) {
      // Landed or not, this process must stop; it is failed for good only when it did not land.
      throw new CheckpointFailure(checkpointId, messageOf(supersededBy), !landed, supersededBy, "SUPERSEDED");
    }
    return landed;
  }

  private unknownFate(checkpointId: number, storeError: unknown, error: unknown): CheckpointFailure {
    return new CheckpointFailure(
      checkpointId,
      `checkpoint ${checkpointId}: its store failed (${messageOf(storeError)}) and the storage cannot tell whether it landed: ${messageOf(error)}`,
      false,
      error,
    );
  }

  /** Learns the fate of a store still running when the attempt ends: fence it, then look. */
  private async settleStore(checkpointId: number): Promise<void> {
    try {
      if (await this.fenceAndFind(checkpointId, new Error("the attempt ended while it ran"))) return;
      this.markFailed(checkpointId);
    } catch (error) {
      if (error instanceof CheckpointFailure && error.definitive) this.markFailed(checkpointId);
    }
  }

  private markFailed(checkpointId: number): void {
    if (!this.definitelyFailed.includes(checkpointId)) this.definitelyFailed.push(checkpointId);
  }

  // The checkpoint is durable: now (and only now) sinks may commit and sources may commit offsets.
  private async notifyComplete(checkpointId: number): Promise<void> {
    await Promise.all(this.options.subtasks.map((subtask) => subtask.notifyCheckpointComplete(checkpointId)));
  }
}

function isSuperseded(error: unknown): boolean {
  return isOnceflowError(error) && error.code === "SUPERSEDED";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function withTimeout<T>(
  promise: Promise<T>,
  timeout: number | undefined,
  checkpointId: number,
  what: string,
): Promise<T> {
  if (timeout === undefined) return promise;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new CheckpointError(
            "CHECKPOINT_FAILED",
            `checkpoint ${checkpointId}: ${what} did not finish within the checkpoint timeout (${Math.round(timeout)} ms)`,
            { checkpointId },
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
