// The public API of @onceflow/core/prometheus: the Metrics adapter over prom-client, kept out of the
// main entry so that the core needs prom-client only when this subpath is imported.
export type { PrometheusMetrics, PrometheusMetricsOptions } from "./observability/prometheus-metrics.js";
export { prometheusMetrics } from "./observability/prometheus-metrics.js";
