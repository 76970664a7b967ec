import { describe, expect, it } from "vitest";
import { Job } from "../runtime/job.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import type { Sink } from "../sink/sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { countAggregate } from "../window/aggregate-function.js";
import { TumblingEventTimeWindows } from "../window/window-assigners.js";
import { createMemoryMetrics, MetricNames } from "./metrics.js";
import { prometheusMetrics } from "./prometheus-metrics.js";

/** The value of the sample `series` (name and labels as written) in Prometheus text. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((each) => each.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Generated clicks in event time (now, one per millisecond), counted per user and window. */
function clicksJob(metrics: ReturnType<typeof prometheusMetrics>): {
  job: Job;
  output: CollectedOutput<unknown>;
} {
  const start = Date.now();
  const output = new CollectedOutput<unknown>();
  const job = new Job({ jobId: "clicks", checkpointing: { interval: 50, storage: "memory" }, metrics });
  job
    .fromSource(
      new GeneratorSource({
        count: 2_000,
        splits: 2,
        generate: (i) => ({ user: `u${i % 10}`, at: start + i }),
      }),
      { uid: "clicks", watermarks: { timestampAssigner: (click) => click.at, maxOutOfOrderness: 0 } },
    )
    .keyBy((click) => click.user)
    .window(TumblingEventTimeWindows.of(100))
    .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), {
      uid: "count",
    })
    .sinkTo(output.sinkFactory(), { uid: "out" });
  return { job, output };
}

describe("the metrics of a job, by Prometheus's conventions", () => {
  it("uses base units, has every counter at 0 from the start, and the process's default metrics", async () => {
    const metrics = prometheusMetrics();
    const { job } = clicksJob(metrics);
    await job.execute();
    const text = await metrics.registry.metrics();
    const names = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => match[1] ?? "");
    // Seconds and bytes, never milliseconds.
    expect(names.filter((name) => /_ms($|_)/.test(name))).toEqual([]);
    expect(names).toEqual(
      expect.arrayContaining([
        MetricNames.checkpointDurationSeconds,
        MetricNames.sinkCommitDurationSeconds,
        "process_cpu_user_seconds_total",
        "process_resident_memory_bytes",
        "nodejs_heap_size_used_bytes",
        "nodejs_eventloop_lag_seconds",
      ]),
    );
    // Counters that nothing incremented are there, at 0.
    const operator = (uid: string) => `{job="clicks",subtask="0",operator="${uid}"}`;
    expect(sample(text, `${MetricNames.lateRecordsDropped}${operator("count")}`)).toBe(0);
    expect(sample(text, `${MetricNames.commitRetries}${operator("out")}`)).toBe(0);
    expect(sample(text, `${MetricNames.checkpointFailures}{job="clicks"}`)).toBe(0);
    expect(sample(text, `${MetricNames.restarts}{job="clicks"}`)).toBe(0);
    // Where the subtask's time went, and how far event time lags behind the clock.
    const subtask = '{job="clicks",subtask="0"}';
    expect(sample(text, `${MetricNames.subtaskBusySeconds}${subtask}`)).toBeGreaterThan(0);
    expect(sample(text, `${MetricNames.subtaskIdleSeconds}${subtask}`)).toBeGreaterThanOrEqual(0);
    expect(sample(text, `${MetricNames.subtaskBackpressuredSeconds}${subtask}`)).toBeGreaterThanOrEqual(0);
    expect(sample(text, `${MetricNames.watermarkLagSeconds}${operator("count")}`)).toBeGreaterThanOrEqual(0);
    // A generator with a count knows how many records each split has left: none at the end.
    for (const split of ["generator-0", "generator-1"]) {
      expect(
        sample(
          text,
          `${MetricNames.sourceLagRecords}{job="clicks",subtask="0",source="clicks",split="${split}"}`,
        ),
      ).toBe(0);
    }
  });

  it("leaves the process's default metrics out when asked to", async () => {
    const metrics = prometheusMetrics({ defaultMetrics: false });
    await clicksJob(metrics).job.execute();
    const text = await metrics.registry.metrics();
    expect(text).toContain(MetricNames.recordsIn);
    expect(text).not.toMatch(/^# TYPE (process|nodejs)_/m);
  });

  it("counts the time a subtask waited for its sink as backpressured", async () => {
    const metrics = createMemoryMetrics();
    const slowSink: Sink<number> = {
      name: "slow",
      write: () => new Promise<void>((resolve) => setTimeout(resolve, 5)),
    };
    const job = new Job({ jobId: "slow-sink", metrics });
    job
      .fromSource(new GeneratorSource({ count: 10, batchSize: 1, generate: (i) => i }), { uid: "numbers" })
      .sinkTo(slowSink, { uid: "out" });
    await job.execute();
    expect(metrics.read(MetricNames.subtaskBackpressuredSeconds)).toBeGreaterThan(0);
    expect(metrics.read(MetricNames.subtaskBusySeconds)).toBeGreaterThan(0);
  });
});
