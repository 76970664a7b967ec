import { type Histogram, MetricNames, type Metrics } from "../observability/metrics.js";
import type { SubtaskCheckpointShare } from "../runtime/subtask.js";

/**
 * Where one checkpoint spent its time, in milliseconds, phase by phase and each measured where it
 * happens. The snapshot phases are those of the subtask whose share was ready last (the one the
 * checkpoint waited for); in order, `barrierMs` through `storeMs` add up to at most the time from
 * the trigger until the checkpoint was stored, and with `commitMs` and `retainMs` to at most the
 * time until the next checkpoint may start. Kept in the checkpoint history (`phases` of a completed
 * entry) and reported as `onceflow_checkpoint_phase_duration_seconds{phase}`.
 *
 * @example
 * ```ts
 * const phases: CheckpointPhases = {
 *   barrierMs: 3.1, alignmentMs: 0, snapshotMs: 0.4, preCommitMs: 6.2, storeMs: 4.8, commitMs: 5.5, retainMs: 1.2,
 * };
 * ```
 */
export interface CheckpointPhases {
  /** From the trigger until the subtask's loop took the barrier (it finishes the batch in hand first). */
  readonly barrierMs: number;
  /** Waiting for the other loops behind a `keyBy` exchange (0 without one). */
  readonly alignmentMs: number;
  /** Operators' snapshots but the sinks', and serializing the subtask's state. */
  readonly snapshotMs: number;
  /** The sinks' snapshots: a two-phase-commit sink's pre-commit (a Kafka sink's flush). */
  readonly preCommitMs: number;
  /** The checkpoint storage's store: state and metadata written, fsynced and published. */
  readonly storeMs: number;
  /**
   * Telling every operator the checkpoint completed: sinks commit their transactions, sources
   * commit offsets. Absent when the commit failed (the attempt fails with it).
   */
  readonly commitMs?: number;
  /** Discarding what `retained` no longer keeps (listing the storage). Absent when it failed. */
  readonly retainMs?: number;
}

/** The `phase` label values of `onceflow_checkpoint_phase_duration_seconds`, in order. */
const PHASE_LABELS = [
  ["barrierMs", "barrier"],
  ["alignmentMs", "alignment"],
  ["snapshotMs", "snapshot"],
  ["preCommitMs", "pre_commit"],
  ["storeMs", "store"],
  ["commitMs", "commit"],
  ["retainMs", "retain"],
] as const;

/**
 * The phases of the snapshot part of a checkpoint, from the share that was ready last: the one
 * the checkpoint waited for.
 *
 * @example
 * ```ts
 * const { barrierMs, preCommitMs } = snapshotPhasesOf(await Promise.all(shares));
 * ```
 */
export function snapshotPhasesOf(
  shares: readonly SubtaskCheckpointShare[],
): Pick<CheckpointPhases, "barrierMs" | "alignmentMs" | "snapshotMs" | "preCommitMs"> {
  let slowest = { barrierMs: 0, alignmentMs: 0, snapshotMs: 0, preCommitMs: 0 };
  let slowestTotal = -1;
  for (const { timings } of shares) {
    const total = timings.barrierMs + timings.alignmentMs + timings.snapshotMs + timings.preCommitMs;
    if (total > slowestTotal) {
      slowest = { ...timings };
      slowestTotal = total;
    }
  }
  return slowest;
}

/**
 * Reports each checkpoint's phases to `onceflow_checkpoint_phase_duration_seconds`, labelled `job`
 * and `phase`.
 *
 * @example
 * ```ts
 * new CheckpointPhaseMetrics(metrics, "orders").observe(phases);
 * ```
 */
export class CheckpointPhaseMetrics {
  private readonly histogram: Histogram;

  constructor(
    metrics: Metrics,
    private readonly jobId: string,
  ) {
    this.histogram = metrics.histogram(
      MetricNames.checkpointPhaseDurationSeconds,
      "Time a completed checkpoint spent in each phase: barrier, alignment, snapshot, pre_commit, store, commit, retain (seconds)",
    );
  }

  observe(phases: CheckpointPhases): void {
    for (const [field, phase] of PHASE_LABELS) {
      const milliseconds = phases[field];
      if (milliseconds !== undefined) this.histogram.observe(milliseconds / 1000, { job: this.jobId, phase });
    }
  }
}

/**
 * The phases cut to whole microseconds, for the history (JSON): down, so they still add up to at
 * most the checkpoint's duration.
 *
 * @example
 * ```ts
 * roundPhases({ barrierMs: 1.23456, alignmentMs: 0, snapshotMs: 0, preCommitMs: 0, storeMs: 2 }).barrierMs; // 1.234
 * ```
 */
export function roundPhases(phases: CheckpointPhases): CheckpointPhases {
  const rounded: Record<string, number> = {};
  for (const [field] of PHASE_LABELS) {
    const value = phases[field];
    if (value !== undefined) rounded[field] = Math.floor(value * 1000) / 1000;
  }
  return rounded as unknown as CheckpointPhases;
}
