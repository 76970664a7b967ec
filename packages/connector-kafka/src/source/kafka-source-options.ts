import type { Kafka } from "kafkajs";
import type { Deserializer } from "./deserializer.js";
import type { MissingPartitionPolicy } from "./missing-partitions.js";

/**
 * One partition's offset, for specific start or stop positions.
 *
 * @example
 * ```ts
 * const offset: PartitionOffset = { topic: "orders", partition: 0, offset: 1200 };
 * ```
 */
export interface PartitionOffset {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number | bigint | string;
}

/**
 * Where to go when there is no committed offset, or an offset is out of range — Kafka's
 * `auto.offset.reset`.
 *
 * @example
 * ```ts
 * const reset: OffsetResetStrategy = "earliest";
 * ```
 */
export type OffsetResetStrategy = "earliest" | "latest";

/**
 * Where a {@link KafkaSource} starts reading partitions that have no checkpointed offset. Offsets
 * restored from a checkpoint always win over it.
 *
 * | onceflow | Flink |
 * |---|---|
 * | `"earliest"` | `OffsetsInitializer.earliest()` / `setStartFromEarliest` |
 * | `"latest"` | `OffsetsInitializer.latest()` / `setStartFromLatest` |
 * | `{ timestamp }` | `OffsetsInitializer.timestamp(t)` / `setStartFromTimestamp` |
 * | `{ committed: reset }` | `OffsetsInitializer.committedOffsets(reset)` / `setStartFromGroupOffsets` |
 * | `{ specific, reset }` | `OffsetsInitializer.offsets(map, reset)` / `setStartFromSpecificOffsets`: a partition not listed starts at the group's committed offset (with `groupId`), else at `reset` |
 *
 * @example
 * ```ts
 * const start: StartingOffsets = { committed: "earliest" };
 * ```
 */
export type StartingOffsets =
  | "earliest"
  | "latest"
  | { readonly timestamp: number }
  | { readonly committed: OffsetResetStrategy }
  | { readonly specific: readonly PartitionOffset[]; readonly reset?: OffsetResetStrategy };

/**
 * Where a bounded {@link KafkaSource} stops (exclusive). Setting it makes the source bounded.
 *
 * | onceflow | Flink (`setBounded`) |
 * |---|---|
 * | `"latest"` | `OffsetsInitializer.latest()`: the end offsets when the partition is first assigned |
 * | `{ timestamp }` | `OffsetsInitializer.timestamp(t)`: stop before the first record at or after `t` |
 * | `{ specific }` | `OffsetsInitializer.offsets(map)`; partitions not listed stop at `latest` |
 *
 * @example
 * ```ts
 * const stop: StoppingOffsets = "latest";
 * ```
 */
export type StoppingOffsets =
  | "latest"
  | { readonly timestamp: number }
  | { readonly specific: readonly PartitionOffset[] };

/**
 * What to do with a record whose key, value or header cannot be deserialized.
 *
 * - `"fail"` (default): fail the job with a `DeserializationError` naming topic, partition and offset.
 * - `"skip"`: drop it and count it in `onceflow_records_skipped_total`.
 * - `{ deadLetterTopic }`: write the raw key, value and headers to that topic, with headers
 *   `onceflow.error`, `onceflow.topic`, `onceflow.partition`, `onceflow.offset`, then go on; counted in
 *   `onceflow_records_dead_lettered_total`. Dead-lettering is at-least-once.
 *
 * @example
 * ```ts
 * const policy: DeserializationErrorPolicy = { deadLetterTopic: "orders-dlq" };
 * ```
 */
export type DeserializationErrorPolicy = "fail" | "skip" | { readonly deadLetterTopic: string };

/**
 * The options of a {@link KafkaSource}.
 *
 * @example
 * ```ts
 * const options: KafkaSourceOptions<string, Order> = {
 *   brokers: ["localhost:9092"], topics: ["orders"], groupId: "orders-job",
 *   value: Deserializers.json<Order>(), startingOffsets: { committed: "earliest" },
 * };
 * ```
 */
export interface KafkaSourceOptions<K = string, V = string, H = string> {
  /** Bootstrap brokers. Give either `brokers` or `kafka`. */
  readonly brokers?: readonly string[];
  /** A kafkajs client of your own (TLS, SASL, retry settings are taken from it). */
  readonly kafka?: Kafka;
  /** Client id sent to the brokers when `brokers` is used (default `onceflow`). */
  readonly clientId?: string;
  /** Topic names, or a RegExp matched against every non-internal topic at each discovery. */
  readonly topics: readonly string[] | RegExp;
  /** The consumer group: for `{ committed }` start positions and for committing offsets (monitoring). */
  readonly groupId?: string;
  /** Default `{ committed: "earliest" }` when `groupId` is set, else `"earliest"`. */
  readonly startingOffsets?: StartingOffsets;
  /** Makes the source bounded: each partition ends at its stopping offset. */
  readonly stoppingOffsets?: StoppingOffsets;
  /** Key deserializer (default UTF-8 string). */
  readonly key?: Deserializer<K>;
  /** Value deserializer (default UTF-8 string). */
  readonly value?: Deserializer<V>;
  /** Header value deserializer (default UTF-8 string). */
  readonly headers?: Deserializer<H>;
  /** Default `"fail"`. */
  readonly onDeserializationError?: DeserializationErrorPolicy;
  /** Commit the checkpointed offsets to `groupId` when a checkpoint completes (default true). */
  readonly commitOffsetsOnCheckpoint?: boolean;
  /**
   * Without checkpointing: commit the handed-out offsets to `groupId` every `autoCommitIntervalMs`
   * (default false). Stops at the first checkpoint, after which only completed checkpoints commit.
   */
  readonly autoCommit?: boolean;
  /** Default 5000 ms, like `auto.commit.interval.ms`. */
  readonly autoCommitIntervalMs?: number;
  /** How often to look for new partitions and topics (default 300000 ms; 0 turns it off). Not in bounded mode. */
  readonly partitionDiscoveryIntervalMs?: number;
  /** Read only committed transactional data (default true, `isolation.level=read_committed`). */
  readonly readCommitted?: boolean;
  /**
   * Most bytes a reader holds fetched but not yet handed out (default 4 MiB): the backpressure
   * bound. Each Fetch asks for at most what is left of it (and at least `maxBytesPerPartition`), so
   * one reader reads at most about this much per round trip: raise it for a broker far away.
   */
  readonly maxPrefetchBytes?: number;
  /** Most records per batch handed to the job (default 1000). */
  readonly maxBatchSize?: number;
  /** Longest a Fetch waits at the broker for data (default 500 ms, `fetch.max.wait.ms`). */
  readonly fetchMaxWaitMs?: number;
  /** Most bytes per partition per Fetch (default 1 MiB, `max.partition.fetch.bytes`). */
  readonly maxBytesPerPartition?: number;
  /**
   * What a reader does with a partition whose topic was deleted: `"wait"` for it (default, as the
   * Java consumer) or `"drop"` it. The other partitions are read on either way.
   */
  readonly onMissingPartition?: MissingPartitionPolicy;
}
