import {
  collectDefaultMetrics,
  exponentialBuckets,
  Counter as PromCounter,
  Gauge as PromGauge,
  Histogram as PromHistogram,
  Registry,
} from "prom-client";
import { registerDefaultMetrics } from "./default-process-metrics.js";
import {
  type Counter,
  type Gauge,
  type Histogram,
  type MetricLabels,
  MetricNames,
  type Metrics,
} from "./metrics.js";

/**
 * Options of {@link prometheusMetrics}.
 *
 * @example
 * ```ts
 * const options: PrometheusMetricsOptions = { buckets: { onceflow_checkpoint_duration_seconds: [0.01, 0.1, 1, 10] } };
 * ```
 */
export interface PrometheusMetricsOptions {
  /** The prom-client registry to register in (default: a new one, so the global one stays untouched). */
  readonly registry?: Registry;
  /**
   * Histogram buckets by metric name. Default by the name's unit: `…_seconds` 1 ms … 5 min,
   * `…_bytes` 1 KiB … 256 MiB, anything else prom-client's defaults.
   */
  readonly buckets?: Readonly<Record<string, readonly number[]>>;
  /**
   * Also register prom-client's default metrics of the process — `process_cpu_seconds_total`,
   * `process_resident_memory_bytes`, `nodejs_eventloop_lag_seconds`, `nodejs_heap_size_used_bytes`
   * … — as every prom-client user expects (default true; once per registry, and not when the
   * registry has them already). Left out: its three gauges named like counters
   * (`nodejs_active_handles_total` …), which Prometheus's naming rules reject; their per-type
   * families (`nodejs_active_handles{type}`) remain.
   */
  readonly defaultMetrics?: boolean;
}

/**
 * The onceflow {@link Metrics} over prom-client, with the registry the metrics live in (serve it
 * with `await registry.metrics()` under `registry.contentType`).
 *
 * @example
 * ```ts
 * const { registry } = prometheusMetrics();
 * const text = await registry.metrics();
 * ```
 */
export interface PrometheusMetrics extends Metrics {
  readonly registry: Registry;
  onCollect(name: string, refresh: () => void): () => void;
}

// The label names onceflow reports each of its metrics with. A metric of another name gets the
// label names of its first observation.
const SUBTASK_OPERATOR = ["job", "subtask", "operator"];
const SINK = ["job", "subtask", "sink"];
const KNOWN_LABELS: Readonly<Record<string, readonly string[]>> = {
  [MetricNames.checkpointDurationSeconds]: ["job"],
  [MetricNames.checkpointPhaseDurationSeconds]: ["job", "phase"],
  [MetricNames.checkpointSizeBytes]: ["job"],
  [MetricNames.lastCompletedCheckpointId]: ["job"],
  [MetricNames.lastCompletedCheckpointTimestampSeconds]: ["job"],
  [MetricNames.checkpointFailures]: ["job"],
  [MetricNames.restarts]: ["job"],
  [MetricNames.recordsIn]: SUBTASK_OPERATOR,
  [MetricNames.recordsOut]: SUBTASK_OPERATOR,
  [MetricNames.operatorRecordsIn]: SUBTASK_OPERATOR,
  [MetricNames.operatorRecordsOut]: SUBTASK_OPERATOR,
  [MetricNames.recordsSkipped]: SUBTASK_OPERATOR,
  [MetricNames.recordsDeadLettered]: SUBTASK_OPERATOR,
  [MetricNames.commitRetries]: SUBTASK_OPERATOR,
  [MetricNames.lateRecordsDropped]: SUBTASK_OPERATOR,
  [MetricNames.sinkPendingTransactions]: SINK,
  [MetricNames.sinkOldestPendingTransactionAgeSeconds]: SINK,
  [MetricNames.sinkCommitDurationSeconds]: SINK,
  [MetricNames.sourceLagRecords]: ["job", "subtask", "source", "split"],
  [MetricNames.watermarkLagSeconds]: SUBTASK_OPERATOR,
  [MetricNames.subtaskBusySeconds]: ["job", "subtask"],
  [MetricNames.subtaskBackpressuredSeconds]: ["job", "subtask"],
  [MetricNames.subtaskIdleSeconds]: ["job", "subtask"],
};

const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const BYTES_BUCKETS = exponentialBuckets(1024, 4, 10);

/** What every adapter over one registry shares, so two jobs in one process can report to it. */
interface RegistryState {
  readonly refreshes: Map<string, Set<() => void>>;
}
const states = new WeakMap<Registry, RegistryState>();

type PromMetric = PromCounter<string> | PromGauge<string> | PromHistogram<string>;

/**
 * A ready {@link Metrics} over prom-client (an optional peer dependency: `npm install prom-client`).
 * Metrics are created on first use, with onceflow's label names for its own metrics
 * ({@link MetricNames}); labels a metric was not created with are dropped, and nothing here ever
 * throws into the job.
 *
 * @example
 * ```ts
 * import { Job } from "@onceflow/core";
 * import { prometheusMetrics } from "@onceflow/core/prometheus";
 *
 * const metrics = prometheusMetrics();
 * const job = new Job({ jobId: "orders", metrics });
 * // in an HTTP handler: res.setHeader("content-type", metrics.registry.contentType); res.end(await metrics.registry.metrics());
 * ```
 */
export function prometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const registry = options.registry ?? new Registry();
  let state = states.get(registry);
  if (state === undefined) {
    state = { refreshes: new Map() };
    states.set(registry, state);
  }
  const { refreshes } = state;
  if (options.defaultMetrics !== false) registerDefaultMetrics({ collectDefaultMetrics }, registry);

  const find = <T extends PromMetric>(name: string, create: (labelNames: string[]) => T) => {
    let metric: T | undefined;
    return (labels: MetricLabels | undefined): { metric: T; labels: Record<string, string> } => {
      metric ??= (registry.getSingleMetric(name) as T | undefined) ?? create(labelNamesOf(name, labels));
      return { metric, labels: declaredOnly(metric, labels) };
    };
  };
  const collect = (name: string) => () => {
    for (const refresh of refreshes.get(name) ?? []) {
      try {
        refresh();
      } catch {
        // A failing refresh leaves the gauge at its last value; a scrape must not fail for it.
      }
    }
  };

  return {
    registry,
    counter(name, help): Counter {
      const get = find(
        name,
        (labelNames) => new PromCounter({ name, help, labelNames, registers: [registry] }),
      );
      return {
        inc(value = 1, labels) {
          if (!(value >= 0)) return; // a counter never goes down (prom-client would throw)
          const { metric, labels: declared } = get(labels);
          (metric as PromCounter<string>).inc(declared, value);
        },
      };
    },
    gauge(name, help): Gauge {
      const get = find(
        name,
        (labelNames) =>
          new PromGauge({ name, help, labelNames, registers: [registry], collect: collect(name) }),
      );
      return {
        set(value, labels) {
          if (Number.isNaN(value)) return;
          const { metric, labels: declared } = get(labels);
          (metric as PromGauge<string>).set(declared, value);
        },
      };
    },
    histogram(name, help): Histogram {
      const buckets = [...(options.buckets?.[name] ?? defaultBucketsOf(name) ?? [])];
      const get = find(
        name,
        (labelNames) =>
          new PromHistogram({
            name,
            help,
            labelNames,
            registers: [registry],
            ...(buckets.length > 0 ? { buckets } : {}),
          }),
      );
      return {
        observe(value, labels) {
          if (Number.isNaN(value)) return;
          const { metric, labels: declared } = get(labels);
          (metric as PromHistogram<string>).observe(declared, value);
        },
      };
    },
    onCollect(name, refresh) {
      const set = refreshes.get(name) ?? new Set<() => void>();
      refreshes.set(name, set);
      const entry = (): void => refresh();
      set.add(entry);
      return () => set.delete(entry);
    },
  };
}

function labelNamesOf(name: string, labels: MetricLabels | undefined): string[] {
  return [...new Set([...(KNOWN_LABELS[name] ?? []), ...Object.keys(labels ?? {})])];
}

// prom-client throws on a label the metric was not created with: keep only the declared ones.
function declaredOnly(metric: PromMetric, labels: MetricLabels | undefined): Record<string, string> {
  const declared: Record<string, string> = {};
  if (labels === undefined) return declared;
  const names = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
  for (const name of names) {
    const value = labels[name];
    if (value !== undefined) declared[name] = value;
  }
  return declared;
}

function defaultBucketsOf(name: string): readonly number[] | undefined {
  if (name.endsWith("_seconds")) return SECONDS_BUCKETS;
  if (name.endsWith("_bytes")) return BYTES_BUCKETS;
  return undefined;
}
