import { MetricNames } from "../observability/metrics.js";
import { type PrometheusSample, parsePrometheusText } from "./prometheus-text.js";

/** The metric names the dashboard reads beyond {@link MetricNames} (reported by the CLI's Prometheus registry). */
const Live = {
  ...MetricNames,
  lastCompletedCheckpointTimestamp: "onceflow_last_completed_checkpoint_timestamp_seconds",
  sinkPendingTransactions: "onceflow_sink_pending_transactions",
  sinkOldestPendingAge: "onceflow_sink_oldest_pending_transaction_age_seconds",
  sourceLagRecords: "onceflow_source_lag_records",
} as const;

/** Count and sum of a histogram over every label set, and their mean (undefined without observations). */
export interface HistogramTotals {
  readonly count: number;
  readonly sum: number;
  readonly mean: number | undefined;
}

/** One sink subtask's transactions as the live metrics report them. */
export interface LiveSinkTransactions {
  readonly sink: string;
  readonly subtask: string;
  readonly pendingTransactions: number | undefined;
  readonly oldestPendingAgeSeconds: number | undefined;
}

/** One source split's lag: records between its position and the end of its input. */
export interface LiveSplitLag {
  readonly source: string;
  readonly split: string;
  readonly subtask: string;
  readonly lagRecords: number;
}

/** When the checkpoint failure counter went up, as seen between two scrapes. */
export interface CheckpointFailureEvent {
  /** The scrape that saw it (ms since the epoch): the failures happened before it. */
  readonly at: number;
  /** How many failures were added since the previous scrape. */
  readonly failures: number;
  /** True on the first scrape: these failures happened at some time before the dashboard looked. */
  readonly beforeFirstScrape: boolean;
}

/**
 * The live view of a job from one scrape of its metrics. A metric the job does not report is
 * `undefined` (or an empty list): the page shows it as absent.
 */
export interface LiveMetricsView {
  readonly available: boolean;
  /** Why there are no metrics: not configured, or the scrape failed. */
  readonly reason?: string;
  readonly scrapedAt: number;
  readonly recordsIn: number | undefined;
  readonly recordsOut: number | undefined;
  /** Per second since the previous scrape; undefined on the first one or after a counter reset. */
  readonly recordsInPerSecond: number | undefined;
  readonly recordsOutPerSecond: number | undefined;
  readonly recordsSkipped: number | undefined;
  readonly recordsDeadLettered: number | undefined;
  readonly restarts: number | undefined;
  readonly checkpointFailures: number | undefined;
  readonly failureEvents: readonly CheckpointFailureEvent[];
  readonly lastCompletedCheckpointId: number | undefined;
  /** Ms since the epoch. */
  readonly lastCompletedCheckpointAt: number | undefined;
  readonly checkpointDurationMs: HistogramTotals | undefined;
  readonly checkpointSizeBytes: HistogramTotals | undefined;
  readonly sinkCommitDurationMs: HistogramTotals | undefined;
  readonly sinks: readonly LiveSinkTransactions[];
  readonly sources: readonly LiveSplitLag[];
  /** Lines of the metrics text that could not be read. */
  readonly problems: readonly string[];
}

const MAX_FAILURE_EVENTS = 200;

/**
 * Turns successive scrapes of a job's Prometheus metrics into {@link LiveMetricsView}s: totals,
 * rates between scrapes, and the moments the checkpoint failure counter went up. Samples labelled
 * with another `job` are left out.
 *
 * @example
 * ```ts
 * const tracker = new LiveMetricsTracker("orders");
 * const view = tracker.update(await (await fetch("http://127.0.0.1:9464/metrics")).text());
 * view.recordsInPerSecond;
 * ```
 */
export class LiveMetricsTracker {
  private previous: { at: number; recordsIn?: number; recordsOut?: number; failures?: number } | undefined;
  private readonly failureEvents: CheckpointFailureEvent[] = [];

  constructor(private readonly jobId: string) {}

  /** Reads one scrape taken at `at` (ms since the epoch). */
  update(text: string, at: number = Date.now()): LiveMetricsView {
    const parsed = parsePrometheusText(text);
    const samples = parsed.samples.filter((s) => s.labels.job === undefined || s.labels.job === this.jobId);
    const total = (name: string): number | undefined => sumOf(samples, name);
    const recordsIn = total(Live.recordsIn);
    const recordsOut = total(Live.recordsOut);
    const failures = total(Live.checkpointFailures);
    const previous = this.previous;
    this.trackFailures(failures, previous?.failures, previous === undefined, at);
    this.previous = {
      at,
      ...(recordsIn === undefined ? {} : { recordsIn }),
      ...(recordsOut === undefined ? {} : { recordsOut }),
      ...(failures === undefined ? {} : { failures }),
    };
    const lastTimestamp = maxOf(samples, Live.lastCompletedCheckpointTimestamp);
    return {
      available: true,
      scrapedAt: at,
      recordsIn,
      recordsOut,
      recordsInPerSecond: rate(recordsIn, previous?.recordsIn, at, previous?.at),
      recordsOutPerSecond: rate(recordsOut, previous?.recordsOut, at, previous?.at),
      recordsSkipped: total(Live.recordsSkipped),
      recordsDeadLettered: total(Live.recordsDeadLettered),
      restarts: total(Live.restarts),
      checkpointFailures: failures,
      failureEvents: [...this.failureEvents],
      lastCompletedCheckpointId: maxOf(samples, Live.lastCompletedCheckpointId),
      lastCompletedCheckpointAt: lastTimestamp === undefined ? undefined : lastTimestamp * 1000,
      checkpointDurationMs: inMilliseconds(histogramOf(samples, Live.checkpointDurationSeconds)),
      checkpointSizeBytes: histogramOf(samples, Live.checkpointSizeBytes),
      sinkCommitDurationMs: inMilliseconds(histogramOf(samples, Live.sinkCommitDurationSeconds)),
      sinks: sinksOf(samples),
      sources: samples
        .filter((s) => s.name === Live.sourceLagRecords)
        .map((s) => ({
          source: s.labels.source ?? "",
          split: s.labels.split ?? "",
          subtask: s.labels.subtask ?? "",
          lagRecords: s.value,
        }))
        .sort((a, b) => a.source.localeCompare(b.source) || a.split.localeCompare(b.split)),
      problems: parsed.problems,
    };
  }

  /** The view when no metrics can be had (none configured, or the scrape failed). */
  unavailable(reason: string, at: number = Date.now()): LiveMetricsView {
    return {
      available: false,
      reason,
      scrapedAt: at,
      recordsIn: undefined,
      recordsOut: undefined,
      recordsInPerSecond: undefined,
      recordsOutPerSecond: undefined,
      recordsSkipped: undefined,
      recordsDeadLettered: undefined,
      restarts: undefined,
      checkpointFailures: undefined,
      failureEvents: [...this.failureEvents],
      lastCompletedCheckpointId: undefined,
      lastCompletedCheckpointAt: undefined,
      checkpointDurationMs: undefined,
      checkpointSizeBytes: undefined,
      sinkCommitDurationMs: undefined,
      sinks: [],
      sources: [],
      problems: [],
    };
  }

  private trackFailures(
    now: number | undefined,
    before: number | undefined,
    first: boolean,
    at: number,
  ): void {
    if (now === undefined || now <= 0) return;
    // A lower total means the job restarted its counters (a new process): count from zero again.
    const added = before === undefined || now < before ? now : now - before;
    if (added <= 0) return;
    this.failureEvents.push({ at, failures: added, beforeFirstScrape: first });
    if (this.failureEvents.length > MAX_FAILURE_EVENTS) this.failureEvents.shift();
  }
}

function sumOf(samples: readonly PrometheusSample[], name: string): number | undefined {
  let sum: number | undefined;
  for (const sample of samples) if (sample.name === name) sum = (sum ?? 0) + sample.value;
  return sum;
}

function maxOf(samples: readonly PrometheusSample[], name: string): number | undefined {
  let max: number | undefined;
  for (const sample of samples) if (sample.name === name) max = Math.max(max ?? sample.value, sample.value);
  return max;
}

function histogramOf(samples: readonly PrometheusSample[], name: string): HistogramTotals | undefined {
  const count = sumOf(samples, `${name}_count`);
  const sum = sumOf(samples, `${name}_sum`);
  if (count === undefined || sum === undefined) return undefined;
  return { count, sum, mean: count > 0 ? sum / count : undefined };
}

/** A histogram of seconds as milliseconds, the unit the page shows. */
function inMilliseconds(totals: HistogramTotals | undefined): HistogramTotals | undefined {
  if (totals === undefined) return undefined;
  return {
    count: totals.count,
    sum: totals.sum * 1000,
    mean: totals.mean === undefined ? undefined : totals.mean * 1000,
  };
}

function rate(now: number | undefined, before: number | undefined, at: number, beforeAt: number | undefined) {
  if (now === undefined || before === undefined || beforeAt === undefined) return undefined;
  const seconds = (at - beforeAt) / 1000;
  if (seconds <= 0 || now < before) return undefined;
  return (now - before) / seconds;
}

function sinksOf(samples: readonly PrometheusSample[]): LiveSinkTransactions[] {
  const bySink = new Map<string, { sink: string; subtask: string; pending?: number; age?: number }>();
  const entry = (s: PrometheusSample) => {
    const sink = s.labels.sink ?? "";
    const subtask = s.labels.subtask ?? "";
    const key = `${sink}\u0000${subtask}`;
    const found = bySink.get(key) ?? { sink, subtask };
    bySink.set(key, found);
    return found;
  };
  for (const s of samples) {
    if (s.name === Live.sinkPendingTransactions) entry(s).pending = s.value;
    if (s.name === Live.sinkOldestPendingAge) entry(s).age = s.value;
  }
  return [...bySink.values()]
    .map((s) => ({
      sink: s.sink,
      subtask: s.subtask,
      pendingTransactions: s.pending,
      oldestPendingAgeSeconds: s.age,
    }))
    .sort((a, b) => a.sink.localeCompare(b.sink) || Number(a.subtask) - Number(b.subtask));
}
