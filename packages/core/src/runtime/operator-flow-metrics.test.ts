import { describe, expect, it } from "vitest";
import { MetricNames } from "../observability/metrics.js";
import { prometheusMetrics } from "../observability/prometheus-metrics.js";
import { DiscardingSink } from "../sink/discarding-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

/** The counter's value per operator uid, summed over subtasks. */
async function perOperator(metrics: ReturnType<typeof prometheusMetrics>, name: string) {
  const values = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  const result: Record<string, number> = {};
  for (const { labels, value } of values) {
    const operator = String(labels.operator);
    result[operator] = (result[operator] ?? 0) + value;
  }
  return result;
}

describe("records in and out of every operator", () => {
  it("counts what each operator received and emitted (Flink's numRecordsIn/numRecordsOut)", async () => {
    const metrics = prometheusMetrics();
    const job = new Job({ jobId: "flow", parallelism: 2, metrics });
    job
      .fromSource(new GeneratorSource({ count: 100, splits: 4, generate: (index) => index }), {
        uid: "numbers",
      })
      .filter((value) => value % 2 === 0, { uid: "evens" })
      .map((value) => value * 10, { uid: "times-ten" })
      .sinkTo(() => new DiscardingSink<number>(), { uid: "out" });
    await job.execute();
    expect(await perOperator(metrics, MetricNames.operatorRecordsOut)).toEqual({
      numbers: 100,
      evens: 50,
      "times-ten": 50,
    });
    expect(await perOperator(metrics, MetricNames.operatorRecordsIn)).toEqual({
      evens: 100,
      "times-ten": 50,
      out: 50,
    });
    // The job-level flow: read by sources, written by sinks.
    expect(await perOperator(metrics, MetricNames.recordsIn)).toEqual({ numbers: 100 });
    expect(await perOperator(metrics, MetricNames.recordsOut)).toEqual({ out: 50 });
  });
});
