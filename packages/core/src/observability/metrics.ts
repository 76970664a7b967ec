/** Labels attached to one observation, such as `{ job: "orders", subtask: "0" }`. */
export type MetricLabels = Readonly<Record<string, string>>;

/** A value that only goes up (records in, restarts). */
export interface Counter {
  inc(value?: number, labels?: MetricLabels): void;
}

/** A value that is set (last completed checkpoint id). */
export interface Gauge {
  set(value: number, labels?: MetricLabels): void;
}

/** A distribution of observations (checkpoint duration, size). */
export interface Histogram {
  observe(value: number, labels?: MetricLabels): void;
}

/**
 * The metrics registry onceflow reports to. It is injected, never global: pass an adapter over
 * prom-client, OpenTelemetry or your own. The names onceflow uses are in {@link MetricNames}.
 *
 * @example
 * ```ts
 * import client from "prom-client";
 * const metrics: Metrics = {
 *   counter: (name, help) => { const c = new client.Counter({ name, help, labelNames: ["job", "subtask", "operator"] });
 *     return { inc: (v = 1, labels = {}) => c.inc(labels, v) }; },
 *   gauge: (name, help) => { const g = new client.Gauge({ name, help, labelNames: ["job", "subtask"] });
 *     return { set: (v, labels = {}) => g.set(labels, v) }; },
 *   histogram: (name, help) => { const h = new client.Histogram({ name, help, labelNames: ["job"] });
 *     return { observe: (v, labels = {}) => h.observe(labels, v) }; },
 * };
 * ```
 */
export interface Metrics {
  counter(name: string, help: string): Counter;
  gauge(name: string, help: string): Gauge;
  histogram(name: string, help: string): Histogram;
  /**
   * Optional: calls `refresh` right before the metric `name` is read (a scrape), so that a gauge
   * that changes with time alone (an age) is current when read. Returns a function that stops it.
   * A registry that is never read on demand leaves it out; such a gauge then holds the value of its
   * last `set` (onceflow also sets it whenever what it measures changes).
   */
  onCollect?(name: string, refresh: () => void): () => void;
}

/**
 * The metric names onceflow reports, stable across releases. They follow Prometheus's conventions:
 * base units (seconds, bytes) in the name, `_total` on counters.
 *
 * @example
 * ```ts
 * metrics.read(MetricNames.recordsIn); // with createMemoryMetrics()
 * ```
 */
export const MetricNames = {
  checkpointDurationSeconds: "onceflow_checkpoint_duration_seconds",
  checkpointPhaseDurationSeconds: "onceflow_checkpoint_phase_duration_seconds",
  checkpointSizeBytes: "onceflow_checkpoint_size_bytes",
  lastCompletedCheckpointId: "onceflow_last_completed_checkpoint_id",
  lastCompletedCheckpointTimestampSeconds: "onceflow_last_completed_checkpoint_timestamp_seconds",
  checkpointFailures: "onceflow_checkpoint_failures_total",
  restarts: "onceflow_restarts_total",
  recordsIn: "onceflow_records_in_total",
  recordsOut: "onceflow_records_out_total",
  operatorRecordsIn: "onceflow_operator_records_in_total",
  operatorRecordsOut: "onceflow_operator_records_out_total",
  recordsSkipped: "onceflow_records_skipped_total",
  recordsDeadLettered: "onceflow_records_dead_lettered_total",
  commitRetries: "onceflow_commit_retries_total",
  lateRecordsDropped: "onceflow_late_records_dropped_total",
  sinkPendingTransactions: "onceflow_sink_pending_transactions",
  sinkOldestPendingTransactionAgeSeconds: "onceflow_sink_oldest_pending_transaction_age_seconds",
  sinkCommitDurationSeconds: "onceflow_sink_commit_duration_seconds",
  sourceLagRecords: "onceflow_source_lag_records",
  watermarkLagSeconds: "onceflow_watermark_lag_seconds",
  subtaskBusySeconds: "onceflow_subtask_busy_seconds_total",
  subtaskBackpressuredSeconds: "onceflow_subtask_backpressured_seconds_total",
  subtaskIdleSeconds: "onceflow_subtask_idle_seconds_total",
} as const;

const noop = { inc() {}, set() {}, observe() {} };

/**
 * A registry that records nothing: the default.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "quiet", metrics: noopMetrics });
 * ```
 */
export const noopMetrics: Metrics = {
  counter: () => noop,
  gauge: () => noop,
  histogram: () => noop,
};

/** What {@link createMemoryMetrics} keeps per metric name: the sum (counters), last value (gauges) or all observations (histograms). */
export interface MemoryMetrics extends Metrics {
  /**
   * The counter's total or the gauge's last value over all label sets; 0 when never reported.
   * Runs the metric's `onCollect` refreshes first, as a scrape would.
   */
  read(name: string): number;
  /** Every observation of a histogram, in order. */
  observations(name: string): number[];
}

/**
 * An in-memory registry, for tests and for the demo's report.
 *
 * @example
 * ```ts
 * const metrics = createMemoryMetrics();
 * await new Job({ jobId: "t", metrics }).fromSource(source).sinkTo(sink).job.execute();
 * metrics.read(MetricNames.recordsIn);
 * ```
 */
export function createMemoryMetrics(): MemoryMetrics {
  const values = new Map<string, number>();
  const histograms = new Map<string, number[]>();
  const refreshes = new Map<string, Set<() => void>>();
  return {
    counter: (name) => ({ inc: (value = 1) => values.set(name, (values.get(name) ?? 0) + value) }),
    gauge: (name) => ({ set: (value) => values.set(name, value) }),
    histogram: (name) => {
      const list = histograms.get(name) ?? [];
      histograms.set(name, list);
      return { observe: (value) => list.push(value) };
    },
    onCollect: (name, refresh) => {
      const set = refreshes.get(name) ?? new Set<() => void>();
      refreshes.set(name, set);
      // A wrapper per registration, so registering the same function twice stops independently.
      const entry = (): void => refresh();
      set.add(entry);
      return () => set.delete(entry);
    },
    read: (name) => {
      for (const refresh of refreshes.get(name) ?? []) refresh();
      return values.get(name) ?? 0;
    },
    observations: (name) => [...(histograms.get(name) ?? [])],
  };
}
