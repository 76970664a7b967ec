import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { MetricNames } from "./metrics.js";
import { prometheusMetrics } from "./prometheus-metrics.js";

const labels = { job: "orders", subtask: "0", operator: "in" };

describe("prometheusMetrics", () => {
  it("reports counters, gauges and histograms with onceflow's labels in the Prometheus text", async () => {
    const metrics = prometheusMetrics();
    metrics.counter(MetricNames.recordsIn, "Records read by sources").inc(5, labels);
    metrics.counter(MetricNames.recordsIn, "Records read by sources").inc(2, labels);
    metrics
      .gauge(MetricNames.lastCompletedCheckpointId, "Last completed checkpoint")
      .set(7, { job: "orders" });
    metrics
      .histogram(MetricNames.checkpointDurationSeconds, "Checkpoint duration (seconds)")
      .observe(0.03, { job: "orders" });
    const text = await metrics.registry.metrics();
    expect(text).toContain('onceflow_records_in_total{job="orders",subtask="0",operator="in"} 7');
    expect(text).toContain('onceflow_last_completed_checkpoint_id{job="orders"} 7');
    expect(text).toContain("# TYPE onceflow_checkpoint_duration_seconds histogram");
    // Buckets from a millisecond up, finer than prom-client's defaults.
    expect(text).toContain('onceflow_checkpoint_duration_seconds_bucket{le="0.025",job="orders"} 0');
    expect(text).toContain('onceflow_checkpoint_duration_seconds_bucket{le="0.05",job="orders"} 1');
    expect(text).toContain('onceflow_checkpoint_duration_seconds_count{job="orders"} 1');
  });

  it("uses the given registry and shares its metrics between adapters (two jobs, one registry)", async () => {
    const registry = new Registry();
    const first = prometheusMetrics({ registry });
    const second = prometheusMetrics({ registry });
    expect(first.registry).toBe(registry);
    first.counter(MetricNames.restarts, "Job restarts").inc(1, { job: "a" });
    second.counter(MetricNames.restarts, "Job restarts").inc(1, { job: "b" });
    const text = await registry.metrics();
    expect(text).toContain('onceflow_restarts_total{job="a"} 1');
    expect(text).toContain('onceflow_restarts_total{job="b"} 1');
  });

  it("names the labels of other metrics after their first observation, and never throws into the job", async () => {
    const metrics = prometheusMetrics();
    const counter = metrics.counter("my_events_total", "Events");
    counter.inc(1, { kind: "a" });
    // A label the metric was not created with is dropped rather than thrown.
    expect(() => counter.inc(1, { kind: "a", extra: "x" })).not.toThrow();
    // A counter cannot go down: ignored rather than thrown.
    expect(() => counter.inc(-1, { kind: "a" })).not.toThrow();
    expect(await metrics.registry.metrics()).toContain('my_events_total{kind="a"} 2');
  });

  it("refreshes a gauge registered with onCollect right before each scrape, until stopped", async () => {
    const metrics = prometheusMetrics();
    const gauge = metrics.gauge(MetricNames.sinkOldestPendingTransactionAgeSeconds, "Age");
    let age = 1;
    const stop = metrics.onCollect(MetricNames.sinkOldestPendingTransactionAgeSeconds, () =>
      gauge.set(age, { job: "j", subtask: "0", sink: "out" }),
    );
    gauge.set(0, { job: "j", subtask: "0", sink: "out" });
    const line = 'onceflow_sink_oldest_pending_transaction_age_seconds{job="j",subtask="0",sink="out"}';
    expect(await metrics.registry.metrics()).toContain(`${line} 1`);
    age = 5;
    expect(await metrics.registry.metrics()).toContain(`${line} 5`);
    stop();
    age = 9;
    expect(await metrics.registry.metrics()).toContain(`${line} 5`);
  });

  it("takes histogram buckets by name", async () => {
    const metrics = prometheusMetrics({ buckets: { my_latency_ms: [100, 200] } });
    metrics.histogram("my_latency_ms", "Latency").observe(150);
    const text = await metrics.registry.metrics();
    expect(text).toContain('my_latency_ms_bucket{le="100"} 0');
    expect(text).toContain('my_latency_ms_bucket{le="200"} 1');
    expect(text).not.toContain('le="250"');
  });
});
