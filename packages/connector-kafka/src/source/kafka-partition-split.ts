import type { SourceSplit } from "@onceflow/core";

/**
 * Where a newly assigned partition starts, before its offset is known.
 * `initial` means the source's `startingOffsets`; `earliest` is used for partitions discovered later.
 */
export type PendingStart = "initial" | "earliest";

/**
 * A Kafka topic-partition as a split — Flink's `KafkaPartitionSplit`. Its state is `nextOffset`, the
 * offset of the next record to hand out; `stoppingOffset` (exclusive) is set in bounded mode.
 * Offsets are decimal strings so that checkpoints stay readable JSON and keep 64-bit precision.
 *
 * @example
 * ```ts
 * const split: KafkaPartitionSplit = { splitId: "orders-3", topic: "orders", partition: 3, nextOffset: "1200" };
 * ```
 */
export interface KafkaPartitionSplit extends SourceSplit {
  readonly topic: string;
  readonly partition: number;
  /** The next offset to read; absent until the start position is resolved. */
  readonly nextOffset?: string;
  /** The offset to stop before (bounded mode); absent when unbounded or not resolved yet. */
  readonly stoppingOffset?: string;
  /** How to find the start when `nextOffset` is absent. */
  readonly pendingStart?: PendingStart;
}

/** The split id of a topic-partition: `topic-partition`, as Flink names them. */
export function splitIdOf(topic: string, partition: number): string {
  return `${topic}-${partition}`;
}

/** Java's `String.hashCode`, so that assignment matches Flink's KafkaSource. */
function javaStringHash(text: string): number {
  let hash = 0;
  for (let i = 0; i < text.length; i++) hash = (Math.imul(31, hash) + text.charCodeAt(i)) | 0;
  return hash;
}

/**
 * Flink's `KafkaSourceEnumerator.getSplitOwner`: the partitions of one topic go round-robin over the
 * subtasks, starting at a subtask chosen by the topic's hash, so that several topics spread evenly.
 */
export function ownerOf(topic: string, partition: number, parallelism: number): number {
  const startIndex = ((Math.imul(javaStringHash(topic), 31) & 0x7fffffff) >>> 0) % parallelism;
  return (startIndex + partition) % parallelism;
}
