// What a reader does with an assigned partition that the cluster no longer has (its topic was
// deleted): the policy of `onMissingPartition`, its log lines and its metrics.
import type { Counter, Gauge, Logger, SourceReaderContext } from "@onceflow/core";
import type { PartitionState } from "./partition-state.js";

/**
 * What a {@link KafkaSource} reader does with an assigned partition whose topic no longer exists
 * (deleted). The other partitions are read on in both cases.
 *
 * - `"wait"` (default, as the Java consumer with `assign()` and Flink's `KafkaSource`): keep the
 *   partition and its position, look it up again with a backoff (up to 5 s), and read on if a
 *   topic of that name comes back (from the position, or per the offset reset strategy when that
 *   is out of range).
 * - `"drop"`: once two metadata lookups at least a second apart say it is gone, and every record
 *   fetched from it before is handed out, forget it: it leaves the reader's checkpoints, and a
 *   topic created again under the name is not read by this reader.
 *
 * Either way a missing partition is logged (a warning when it goes missing, info when it comes back
 * or is dropped) and counted in `onceflow_kafka_source_missing_partitions` (a gauge per reader) and
 * `onceflow_kafka_source_partitions_dropped_total`.
 *
 * @example
 * ```ts
 * const policy: MissingPartitionPolicy = "drop";
 * ```
 */
export type MissingPartitionPolicy = "wait" | "drop";

/**
 * Metric names of missing partitions: a gauge per reader, and a counter of dropped ones.
 *
 * @example
 * ```ts
 * metrics.read(MissingPartitionMetricNames.missingPartitions); // with createMemoryMetrics()
 * ```
 */
export const MissingPartitionMetricNames = {
  missingPartitions: "onceflow_kafka_source_missing_partitions",
  partitionsDropped: "onceflow_kafka_source_partitions_dropped_total",
} as const;

/** How long a partition must stay missing before `"drop"` forgets it. */
const DROP_CONFIRMATION_MS = 1000;

/** The missing partitions of one reader: when each went missing, its log lines and metrics. */
export class MissingPartitions {
  private readonly since = new Map<PartitionState, number>();
  private readonly gauge: Gauge;
  private readonly dropped: Counter;
  private readonly labels: Readonly<Record<string, string>>;

  constructor(
    private readonly policy: MissingPartitionPolicy,
    context: SourceReaderContext,
    private readonly logger: Logger,
  ) {
    this.gauge = context.metrics.gauge(
      MissingPartitionMetricNames.missingPartitions,
      "Assigned Kafka partitions whose topic the cluster no longer has",
    );
    this.dropped = context.metrics.counter(
      MissingPartitionMetricNames.partitionsDropped,
      "Kafka partitions a reader stopped reading because their topic was deleted",
    );
    this.labels = { job: context.jobId, subtask: String(context.subtaskIndex), source: context.operatorUid };
  }

  /** Notes that metadata has no such partition; returns whether to drop it now (policy `"drop"`). */
  missing(state: PartitionState, now: number): boolean {
    const since = this.since.get(state);
    if (since === undefined) {
      this.since.set(state, now);
      this.gauge.set(this.since.size, this.labels);
      this.logger.warn(
        {
          topic: state.topic,
          partition: state.partition,
          offset: String(state.nextOffset),
          policy: this.policy,
        },
        this.policy === "drop"
          ? "kafka partition missing (topic deleted?): it is dropped unless it comes back"
          : "kafka partition missing (topic deleted?): waiting for it; the other partitions are read on",
      );
      return false;
    }
    return this.policy === "drop" && state.chunks.length === 0 && now - since >= DROP_CONFIRMATION_MS;
  }

  /** Notes that the partition has a leader again. */
  found(state: PartitionState): void {
    if (!this.since.delete(state)) return;
    this.gauge.set(this.since.size, this.labels);
    this.logger.info({ topic: state.topic, partition: state.partition }, "kafka partition found again");
  }

  /** Notes that the reader forgot the partition. */
  drop(state: PartitionState): void {
    this.since.delete(state);
    this.gauge.set(this.since.size, this.labels);
    this.dropped.inc(1, this.labels);
    this.logger.warn(
      { topic: state.topic, partition: state.partition, offset: String(state.nextOffset) },
      "kafka partition dropped: its topic no longer exists",
    );
  }
}
