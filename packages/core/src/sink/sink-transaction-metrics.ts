import type { RuntimeContext } from "../api/checkpointed-function.js";
import { type Gauge, type Histogram, MetricNames } from "../observability/metrics.js";

/** What the metrics read of a sink: its pending transactions' start times (ms since the epoch). */
export type PendingStartTimes = () => readonly number[];

/**
 * The transaction metrics of one two-phase-commit sink subtask: how many transactions are pending
 * (pre-committed, waiting for their checkpoint to complete), how old the oldest one is (since it
 * began: what the external system's transaction timeout counts), and how long each commit took.
 * Labels: `{ job, subtask, sink }`, `sink` being the sink's operator uid.
 *
 * @example
 * ```ts
 * const metrics = new SinkTransactionMetrics(runtimeContext, () => pending.map((p) => p.startedAt));
 * metrics.update(); // after the pending list changed
 * ```
 */
export class SinkTransactionMetrics {
  private readonly pendingGauge: Gauge;
  private readonly ageGauge: Gauge;
  private readonly commitDurations: Histogram;
  private readonly labels: Record<string, string>;
  private readonly stopRefresh: () => void;

  constructor(
    context: RuntimeContext,
    private readonly startTimes: PendingStartTimes,
  ) {
    const { metrics } = context;
    this.labels = { job: context.jobId, subtask: String(context.subtaskIndex), sink: context.operatorUid };
    this.pendingGauge = metrics.gauge(
      MetricNames.sinkPendingTransactions,
      "Pre-committed transactions of a sink waiting for their checkpoint to complete",
    );
    this.ageGauge = metrics.gauge(
      MetricNames.sinkOldestPendingTransactionAgeSeconds,
      "Age of a sink's oldest pending transaction since it began (0 when none)",
    );
    this.commitDurations = metrics.histogram(
      MetricNames.sinkCommitDurationSeconds,
      "Time to commit one pending transaction, retries included (seconds)",
    );
    // The age grows with time alone: refresh it right before each scrape.
    this.stopRefresh =
      metrics.onCollect?.(MetricNames.sinkOldestPendingTransactionAgeSeconds, () => this.updateAge()) ??
      (() => undefined);
    this.update();
  }

  /** Sets both gauges from the sink's pending transactions now. */
  update(): void {
    this.pendingGauge.set(this.startTimes().length, this.labels);
    this.updateAge();
  }

  /** Records one commit's duration. */
  observeCommit(durationMs: number): void {
    this.commitDurations.observe(durationMs / 1000, this.labels);
  }

  /** Sets the gauges one last time and stops refreshing them (the sink closed). */
  close(): void {
    this.update();
    this.stopRefresh();
  }

  private updateAge(): void {
    const times = this.startTimes();
    const oldest = times.length === 0 ? undefined : Math.min(...times);
    this.ageGauge.set(oldest === undefined ? 0 : Math.max(0, Date.now() - oldest) / 1000, this.labels);
  }
}
