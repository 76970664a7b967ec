import {
  type Counter,
  type Gauge,
  type MetricLabels,
  MetricNames,
  type Metrics,
} from "../observability/metrics.js";

/** What the loop metrics read of an operator: its uid and combined input watermark. */
interface WatermarkedOperator {
  readonly uid: string;
  readonly currentWatermark: number;
}

// Report the time counters at most this often from the loop itself (a scrape reports at once).
const REPORT_INTERVAL_MS = 1_000;

/**
 * Where one subtask's loop spends its time, and how far event time lags behind the clock —
 * Flink's `busyTimeMsPerSecond`, `backPressuredTimeMsPerSecond`, `idleTimeMsPerSecond` and
 * `currentInputWatermark`, as Prometheus counters of seconds (their `rate()` is the share of time):
 *
 * - `onceflow_subtask_idle_seconds_total`: the loop waited for input, mail or a timer;
 * - `onceflow_subtask_backpressured_seconds_total`: it waited for a sink to accept records (an
 *   awaited write: the external system, or the sink's full buffer, pushes back);
 * - `onceflow_subtask_busy_seconds_total`: the rest — reading, processing, checkpointing.
 *
 * and `onceflow_watermark_lag_seconds{operator}`: the clock minus each operator's current
 * watermark, for operators that have one (event time in milliseconds since the epoch).
 */
export class SubtaskLoopMetrics {
  private readonly labels: MetricLabels;
  private readonly busy: Counter;
  private readonly backpressured: Counter;
  private readonly idle: Counter;
  private readonly watermarkLag: Gauge;
  private readonly stops: Array<() => void> = [];
  private readonly startedAt = performance.now();
  private idleMs = 0;
  private backpressuredMs = 0;
  private reported = { busy: 0, backpressured: 0, idle: 0 };
  private lastReportAt = 0;
  private closed = false;

  constructor(
    metrics: Metrics,
    jobId: string,
    subtaskIndex: number,
    private readonly operators: readonly WatermarkedOperator[],
  ) {
    this.labels = { job: jobId, subtask: String(subtaskIndex) };
    this.busy = metrics.counter(
      MetricNames.subtaskBusySeconds,
      "Time a subtask's loop was busy reading, processing and checkpointing (seconds)",
    );
    this.backpressured = metrics.counter(
      MetricNames.subtaskBackpressuredSeconds,
      "Time a subtask's loop waited for a sink to accept records (seconds)",
    );
    this.idle = metrics.counter(
      MetricNames.subtaskIdleSeconds,
      "Time a subtask's loop waited for input, mail or a timer (seconds)",
    );
    this.watermarkLag = metrics.gauge(
      MetricNames.watermarkLagSeconds,
      "The clock minus an operator's current watermark (seconds)",
    );
    for (const counter of [this.busy, this.backpressured, this.idle]) counter.inc(0, this.labels);
    for (const name of [
      MetricNames.subtaskBusySeconds,
      MetricNames.subtaskBackpressuredSeconds,
      MetricNames.subtaskIdleSeconds,
      MetricNames.watermarkLagSeconds,
    ]) {
      const stop = metrics.onCollect?.(name, () => this.report());
      if (stop !== undefined) this.stops.push(stop);
    }
  }

  /** The loop waited `ms` for input, mail or a timer. */
  waitedIdle(ms: number): void {
    this.idleMs += ms;
    this.reportNowAndThen();
  }

  /** The loop waited `ms` for a sink's asynchronous write. */
  waitedForSink(ms: number): void {
    this.backpressuredMs += ms;
  }

  /** Brings the counters and the watermark lag up to now. */
  report(): void {
    if (this.closed) return;
    this.lastReportAt = performance.now();
    const total = this.lastReportAt - this.startedAt;
    const now = {
      busy: Math.max(0, total - this.idleMs - this.backpressuredMs) / 1000,
      backpressured: this.backpressuredMs / 1000,
      idle: this.idleMs / 1000,
    };
    // Counters only go up: report the growth since the last report.
    if (now.busy > this.reported.busy) this.busy.inc(now.busy - this.reported.busy, this.labels);
    if (now.backpressured > this.reported.backpressured)
      this.backpressured.inc(now.backpressured - this.reported.backpressured, this.labels);
    if (now.idle > this.reported.idle) this.idle.inc(now.idle - this.reported.idle, this.labels);
    this.reported = {
      busy: Math.max(now.busy, this.reported.busy),
      backpressured: Math.max(now.backpressured, this.reported.backpressured),
      idle: Math.max(now.idle, this.reported.idle),
    };
    const clock = Date.now();
    for (const operator of this.operators) {
      const watermark = operator.currentWatermark;
      // No watermark yet: no lag to tell. The end of input (watermark +∞): caught up.
      if (watermark === Number.NEGATIVE_INFINITY || Number.isNaN(watermark)) continue;
      this.watermarkLag.set(Math.max(0, clock - watermark) / 1000, {
        ...this.labels,
        operator: operator.uid,
      });
    }
  }

  /** Reports one last time and stops reporting (the loop ended). */
  close(): void {
    this.report();
    this.closed = true;
    for (const stop of this.stops.splice(0)) stop();
  }

  private reportNowAndThen(): void {
    if (performance.now() - this.lastReportAt >= REPORT_INTERVAL_MS) this.report();
  }
}
