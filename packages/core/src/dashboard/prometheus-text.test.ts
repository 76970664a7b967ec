import { describe, expect, it } from "vitest";
import { parsePrometheusText } from "./prometheus-text.js";

describe("parsePrometheusText", () => {
  it("reads samples with labels, types and histograms as prom-client writes them", () => {
    const text = [
      "# HELP onceflow_records_in_total Records read",
      "# TYPE onceflow_records_in_total counter",
      'onceflow_records_in_total{job="orders",subtask="0",operator="src"} 120',
      'onceflow_records_in_total{job="orders",subtask="1",operator="src"} 80',
      "# TYPE onceflow_checkpoint_duration_seconds histogram",
      'onceflow_checkpoint_duration_seconds_bucket{le="10",job="orders"} 3',
      'onceflow_checkpoint_duration_seconds_bucket{le="+Inf",job="orders"} 4',
      'onceflow_checkpoint_duration_seconds_sum{job="orders"} 57.5',
      'onceflow_checkpoint_duration_seconds_count{job="orders"} 4',
      "onceflow_restarts_total 2 1700000000000",
      "",
    ].join("\n");
    const parsed = parsePrometheusText(text);
    expect(parsed.problems).toEqual([]);
    expect(parsed.types.get("onceflow_records_in_total")).toBe("counter");
    expect(parsed.types.get("onceflow_checkpoint_duration_seconds")).toBe("histogram");
    expect(parsed.samples).toHaveLength(7);
    expect(parsed.samples[0]).toEqual({
      name: "onceflow_records_in_total",
      labels: { job: "orders", subtask: "0", operator: "src" },
      value: 120,
    });
    expect(parsed.samples[3]).toEqual({
      name: "onceflow_checkpoint_duration_seconds_bucket",
      labels: { le: "+Inf", job: "orders" },
      value: 4,
    });
    expect(parsed.samples[6]).toEqual({ name: "onceflow_restarts_total", labels: {}, value: 2 });
  });

  it("unescapes label values and reads special values", () => {
    const text = [
      'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb"} NaN',
      "pos +Inf",
      "neg -Inf",
      "sci 1.5e3",
      'trailing{a="1",} 7',
    ].join("\n");
    const { samples, problems } = parsePrometheusText(text);
    expect(problems).toEqual([]);
    expect(samples[0]?.labels).toEqual({ path: "C:\\dir", quote: 'say "hi"', nl: "a\nb" });
    expect(samples[0]?.value).toBeNaN();
    expect(samples.slice(1).map((s) => s.value)).toEqual([Infinity, -Infinity, 1500, 7]);
    expect(samples[4]?.labels).toEqual({ a: "1" });
  });

  it("reports lines it cannot read and keeps the others", () => {
    const text = [
      "good 1",
      "novalue",
      'broken{a="1} 2',
      "bad{a=1} 3",
      "word abc",
      "{x} 1",
      "also_good 2",
    ].join("\n");
    const { samples, problems } = parsePrometheusText(text);
    expect(samples.map((s) => s.name)).toEqual(["good", "also_good"]);
    expect(problems).toEqual([
      "line 2: novalue has no value",
      "line 3: label a has an unterminated value",
      "line 4: label a has no quoted value",
      "line 5: word has a value that is not a number: abc",
      "line 6: no metric name",
    ]);
  });
});
