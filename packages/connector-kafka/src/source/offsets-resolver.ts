import type { Admin } from "kafkajs";
import type {
  OffsetResetStrategy,
  PartitionOffset,
  StartingOffsets,
  StoppingOffsets,
} from "./kafka-source-options.js";

/** A topic-partition whose offset is to be found. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/**
 * Turns start and stop positions into offsets with the admin API (ListOffsets and OffsetFetch), one
 * request per topic. Under read_committed, "latest" is the last stable offset.
 */
export class OffsetsResolver {
  constructor(
    private readonly admin: Admin,
    private readonly groupId: string | undefined,
  ) {}

  /** The earliest or latest offset of each partition. */
  async reset(
    partitions: readonly TopicPartition[],
    strategy: OffsetResetStrategy,
  ): Promise<Map<string, bigint>> {
    const result = new Map<string, bigint>();
    for (const [topic, wanted] of byTopic(partitions)) {
      const offsets = await this.admin.fetchTopicOffsets(topic);
      for (const o of offsets) {
        if (wanted.has(o.partition))
          result.set(keyOf(topic, o.partition), BigInt(strategy === "earliest" ? o.low : o.high));
      }
    }
    return result;
  }

  /** The offset of the first record at or after `timestamp` (the latest offset when there is none). */
  async forTimestamp(partitions: readonly TopicPartition[], timestamp: number): Promise<Map<string, bigint>> {
    const result = new Map<string, bigint>();
    for (const [topic, wanted] of byTopic(partitions)) {
      const offsets = await this.admin.fetchTopicOffsetsByTimestamp(topic, timestamp);
      for (const o of offsets) {
        if (wanted.has(o.partition)) result.set(keyOf(topic, o.partition), BigInt(o.offset));
      }
    }
    return result;
  }

  /** The group's committed offsets of `partitions`; partitions without one are left out. */
  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, bigint>> {
    const result = new Map<string, bigint>();
    if (this.groupId === undefined) return result;
    const wanted = byTopic(partitions);
    const groupOffsets = await this.admin.fetchOffsets({ groupId: this.groupId, topics: [...wanted.keys()] });
    for (const { topic, partitions: ps } of groupOffsets) {
      for (const p of ps) {
        if (Number(p.offset) >= 0 && wanted.get(topic)?.has(p.partition) === true)
          result.set(keyOf(topic, p.partition), BigInt(p.offset));
      }
    }
    return result;
  }

  /** Start offsets for partitions that have no checkpointed position. */
  async start(partitions: readonly TopicPartition[], spec: StartingOffsets): Promise<Map<string, bigint>> {
    if (partitions.length === 0) return new Map();
    if (spec === "earliest" || spec === "latest") return this.reset(partitions, spec);
    if ("timestamp" in spec) return this.forTimestamp(partitions, spec.timestamp);
    let found: Map<string, bigint>;
    if ("committed" in spec) {
      found = await this.committed(partitions);
    } else {
      // Flink's OffsetsInitializer.offsets(map, reset): a partition not listed starts from the
      // group's committed offset when there is one, and only then from the reset strategy.
      found = specificOffsets(partitions, spec.specific);
      const unlisted = partitions.filter((p) => !found.has(keyOf(p.topic, p.partition)));
      if (unlisted.length > 0) {
        for (const [key, offset] of await this.committed(unlisted)) found.set(key, offset);
      }
    }
    const reset = "committed" in spec ? spec.committed : (spec.reset ?? "earliest");
    const missing = partitions.filter((p) => !found.has(keyOf(p.topic, p.partition)));
    for (const [key, offset] of await this.reset(missing, reset)) found.set(key, offset);
    return found;
  }

  /** Stop offsets (exclusive) for a bounded source. */
  async stop(partitions: readonly TopicPartition[], spec: StoppingOffsets): Promise<Map<string, bigint>> {
    if (partitions.length === 0) return new Map();
    if (spec === "latest") return this.reset(partitions, "latest");
    if ("timestamp" in spec) return this.forTimestamp(partitions, spec.timestamp);
    const found = specificOffsets(partitions, spec.specific);
    const missing = partitions.filter((p) => !found.has(keyOf(p.topic, p.partition)));
    for (const [key, offset] of await this.reset(missing, "latest")) found.set(key, offset);
    return found;
  }
}

/** The map key used by {@link OffsetsResolver} results. */
export function offsetKey(topic: string, partition: number): string {
  return keyOf(topic, partition);
}

function byTopic(partitions: readonly TopicPartition[]): Map<string, Set<number>> {
  const topics = new Map<string, Set<number>>();
  for (const p of partitions) {
    const set = topics.get(p.topic) ?? new Set<number>();
    set.add(p.partition);
    topics.set(p.topic, set);
  }
  return topics;
}

function specificOffsets(
  partitions: readonly TopicPartition[],
  specific: readonly PartitionOffset[],
): Map<string, bigint> {
  const wanted = new Set(partitions.map((p) => keyOf(p.topic, p.partition)));
  const result = new Map<string, bigint>();
  for (const o of specific) {
    const key = keyOf(o.topic, o.partition);
    if (wanted.has(key)) result.set(key, BigInt(o.offset));
  }
  return result;
}
