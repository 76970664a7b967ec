import { type Gauge, MetricNames, type SourceReaderContext } from "@onceflow/core";

/**
 * The source lag of a reader's partitions, `onceflow_source_lag_records{job,subtask,source,split}`:
 * the partition's end offset (the last stable offset with `readCommitted`, else the high watermark,
 * both as the last Fetch response gave them; the stopping offset if lower) minus the position the
 * reader has handed out — how many records are left to read. Kafka's consumer lag, per split.
 *
 * @example
 * ```ts
 * const lag = new PartitionLag(context, true);
 * lag.fetched(split, 120n, 120n); // from a Fetch response
 * lag.report(split, 100n, undefined); // 20 records behind
 * ```
 */
export class PartitionLag {
  private readonly gauge: Gauge;
  private readonly labels: { job: string; subtask: string; source: string };
  private readonly ends = new Map<string, bigint>();
  /** The label set of each split, built once: `report` runs for every batch handed out. */
  private readonly labelsOf = new Map<string, Readonly<Record<string, string>>>();

  constructor(
    context: SourceReaderContext,
    private readonly readCommitted: boolean,
  ) {
    this.gauge = context.metrics.gauge(
      MetricNames.sourceLagRecords,
      "Records of a source split not read yet: its end offset minus the source's position",
    );
    this.labels = { job: context.jobId, subtask: String(context.subtaskIndex), source: context.operatorUid };
  }

  /** Keeps the end offset a Fetch response gave for `splitId`. */
  fetched(splitId: string, highWatermark: bigint, lastStableOffset: bigint | undefined): void {
    const stable = lastStableOffset !== undefined && lastStableOffset >= 0n ? lastStableOffset : undefined;
    this.ends.set(splitId, this.readCommitted && stable !== undefined ? stable : highWatermark);
  }

  /** Sets the gauge for `splitId` at `position` (unknown end: nothing yet). */
  report(splitId: string, position: bigint, stoppingOffset: bigint | undefined): void {
    let end = this.ends.get(splitId);
    if (end === undefined) return;
    if (stoppingOffset !== undefined && stoppingOffset < end) end = stoppingOffset;
    const lag = end > position ? end - position : 0n;
    let labels = this.labelsOf.get(splitId);
    if (labels === undefined) {
      labels = { ...this.labels, split: splitId };
      this.labelsOf.set(splitId, labels);
    }
    this.gauge.set(Number(lag), labels);
  }
}
