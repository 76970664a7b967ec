import {
  ConfigurationError,
  jsonSerializer,
  type Source,
  type SourceReaderContext,
  type SplitEnumeratorContext,
  type TypeSerializer,
} from "@onceflow/core";
import type { Kafka } from "kafkajs";
import { lazyKafkaClientOf, requirePositiveInteger, validateClientOptions } from "../internal/client.js";
import { type Deserializer, Deserializers } from "./deserializer.js";
import { type KafkaPartitionSplit, ownerOf, splitIdOf } from "./kafka-partition-split.js";
import type { KafkaRecord } from "./kafka-record.js";
import type { KafkaSourceOptions, StartingOffsets } from "./kafka-source-options.js";
import { KafkaSourceReader, type KafkaSourceReaderConfig } from "./kafka-source-reader.js";

const DEFAULT_DISCOVERY_INTERVAL_MS = 300_000;
// Records waiting in the buffer outlive young-generation collections and are promoted: a smaller
// buffer was as fast, and with a reader per thread part of halving the process's memory
// (bench/README.md, memory).
const DEFAULT_MAX_PREFETCH_BYTES = 4 * 1024 * 1024;

/**
 * A checkpointed Kafka source — Flink's `KafkaSource`. Each topic-partition is a split, assigned to
 * a subtask deterministically (Flink's rule); its state is the next offset to read, kept in the
 * checkpoint. After a restore the checkpointed offsets win over `startingOffsets`; partitions found
 * later by discovery start from the earliest offset. Offsets are committed to `groupId` only when a
 * checkpoint completes, for lag monitoring. Records carry their Kafka timestamp as event time.
 *
 * @example
 * ```ts
 * const source = new KafkaSource({
 *   brokers: ["localhost:9092"],
 *   topics: ["orders"],
 *   groupId: "orders-job",
 *   value: Deserializers.json<Order>(),
 * });
 * job.fromSource(source, { uid: "orders-in" }).map((record) => record.value).sinkTo(sink, { uid: "out" });
 * ```
 */
export class KafkaSource<K = string, V = string, H = string>
  implements Source<KafkaRecord<K, V, H>, KafkaPartitionSplit>
{
  readonly name: string;
  readonly boundedness: "bounded" | "continuous";
  readonly splitDiscoveryIntervalMs: number | undefined;
  /** Splits are stored as JSON, so `onceflow checkpoints inspect` shows readable offsets. */
  readonly splitSerializer: TypeSerializer<KafkaPartitionSplit> = jsonSerializer<KafkaPartitionSplit>();
  /** The client, made when the source first talks to Kafka (discovery, a reader), not when built. */
  private readonly kafka: () => Kafka;
  private readonly config: Omit<KafkaSourceReaderConfig<K, V, H>, "kafka">;
  private readonly topics: readonly string[] | RegExp;
  private initialPartitions: Set<string> | undefined;

  constructor(options: KafkaSourceOptions<K, V, H>) {
    validateClientOptions(options);
    validateTopics(options.topics);
    const startingOffsets: StartingOffsets =
      options.startingOffsets ?? (options.groupId === undefined ? "earliest" : { committed: "earliest" });
    if (
      typeof startingOffsets === "object" &&
      "committed" in startingOffsets &&
      options.groupId === undefined
    ) {
      throw new ConfigurationError(
        "startingOffsets",
        "{ committed } reads the consumer group's offsets but no groupId is set: set groupId, or start from 'earliest' or 'latest'",
      );
    }
    if (options.autoCommit === true && options.groupId === undefined) {
      throw new ConfigurationError("autoCommit", "auto-commit needs a groupId to commit to: set groupId");
    }
    requirePositiveInteger("autoCommitIntervalMs", options.autoCommitIntervalMs);
    requirePositiveInteger("maxPrefetchBytes", options.maxPrefetchBytes);
    requirePositiveInteger("maxBatchSize", options.maxBatchSize);
    requirePositiveInteger("fetchMaxWaitMs", options.fetchMaxWaitMs);
    requirePositiveInteger("maxBytesPerPartition", options.maxBytesPerPartition);
    const onMissingPartition = options.onMissingPartition ?? "wait";
    if (onMissingPartition !== "wait" && onMissingPartition !== "drop") {
      throw new ConfigurationError(
        "onMissingPartition",
        `must be "wait" (keep the partition and read it again if its topic comes back) or "drop", got ${String(onMissingPartition)}`,
      );
    }
    const discovery = options.partitionDiscoveryIntervalMs ?? DEFAULT_DISCOVERY_INTERVAL_MS;
    if (!Number.isInteger(discovery) || discovery < 0) {
      throw new ConfigurationError(
        "partitionDiscoveryIntervalMs",
        `must be 0 (off) or a positive integer, got ${discovery}`,
      );
    }
    this.kafka = lazyKafkaClientOf(options);
    this.topics = options.topics;
    this.boundedness = options.stoppingOffsets === undefined ? "continuous" : "bounded";
    this.splitDiscoveryIntervalMs = this.boundedness === "bounded" || discovery === 0 ? undefined : discovery;
    this.name = `KafkaSource(${Array.isArray(options.topics) ? options.topics.join(",") : String(options.topics)})`;
    this.config = {
      groupId: options.groupId,
      startingOffsets,
      stoppingOffsets: options.stoppingOffsets,
      key: options.key ?? (Deserializers.string() as unknown as Deserializer<K>),
      value: options.value ?? (Deserializers.string() as unknown as Deserializer<V>),
      headers: options.headers ?? (Deserializers.string() as unknown as Deserializer<H>),
      onDeserializationError: options.onDeserializationError ?? "fail",
      commitOffsetsOnCheckpoint: options.commitOffsetsOnCheckpoint ?? true,
      autoCommit: options.autoCommit ?? false,
      autoCommitIntervalMs: options.autoCommitIntervalMs ?? 5000,
      readCommitted: options.readCommitted ?? true,
      maxPrefetchBytes: options.maxPrefetchBytes ?? DEFAULT_MAX_PREFETCH_BYTES,
      maxBatchSize: options.maxBatchSize ?? 1000,
      fetchMaxWaitMs: options.fetchMaxWaitMs ?? 500,
      maxBytesPerPartition: options.maxBytesPerPartition ?? 1024 * 1024,
      onMissingPartition,
    };
  }

  /**
   * Lists the partitions of the topics. Those seen at the first discovery start at `startingOffsets`;
   * any seen later (new partitions or topics) start from the earliest offset, so nothing written to
   * them is missed.
   */
  async discoverSplits(context: SplitEnumeratorContext): Promise<KafkaPartitionSplit[]> {
    const admin = this.kafka().admin();
    await admin.connect();
    try {
      let topics: string[];
      if (Array.isArray(this.topics)) {
        topics = [...this.topics];
        const existing = new Set(await admin.listTopics());
        const missing = topics.filter((t) => !existing.has(t));
        if (missing.length > 0) {
          throw new ConfigurationError(
            "topics",
            `topic(s) ${missing.map((t) => `'${t}'`).join(", ")} do not exist: create them first or fix the names`,
          );
        }
      } else {
        const pattern = this.topics as RegExp;
        topics = (await admin.listTopics()).filter(
          (t) => !t.startsWith("__") && new RegExp(pattern.source, pattern.flags.replace("g", "")).test(t),
        );
      }
      const metadata = topics.length === 0 ? { topics: [] } : await admin.fetchTopicMetadata({ topics });
      const splits: KafkaPartitionSplit[] = [];
      for (const topic of metadata.topics) {
        for (const p of topic.partitions) {
          const splitId = splitIdOf(topic.name, p.partitionId);
          splits.push({ splitId, topic: topic.name, partition: p.partitionId, pendingStart: "initial" });
        }
      }
      splits.sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));
      if (this.initialPartitions === undefined) {
        this.initialPartitions = new Set(splits.map((s) => s.splitId));
        context.logger.info({ partitions: splits.length }, "kafka partitions discovered");
        return splits;
      }
      const known = this.initialPartitions;
      return splits.map((s) => (known.has(s.splitId) ? s : { ...s, pendingStart: "earliest" }));
    } finally {
      await admin.disconnect();
    }
  }

  /** Flink's assignment: a topic's partitions go round-robin from a subtask chosen by the topic's hash. */
  assignSplit(split: KafkaPartitionSplit, parallelism: number): number {
    return ownerOf(split.topic, split.partition, parallelism);
  }

  createReader(context: SourceReaderContext): KafkaSourceReader<K, V, H> {
    return new KafkaSourceReader({ ...this.config, kafka: this.kafka() }, context);
  }
}

function validateTopics(topics: readonly string[] | RegExp | undefined): void {
  if (topics instanceof RegExp) return;
  if (
    !Array.isArray(topics) ||
    topics.length === 0 ||
    topics.some((t) => typeof t !== "string" || t === "")
  ) {
    throw new ConfigurationError("topics", "give at least one topic name, or a RegExp to match topic names");
  }
}
