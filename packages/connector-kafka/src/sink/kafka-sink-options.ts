import type { CommitRetryOptions } from "@onceflow/core";
import type { Kafka } from "kafkajs";
import type { CompressionType } from "../protocol/compression/compression-codec.js";
import type { KafkaProducerSettings } from "./producer-settings.js";
import type { Serializer } from "./serializer.js";

/**
 * What a {@link KafkaSink} promises — Flink's `DeliveryGuarantee`.
 *
 * - `"none"`: records are sent without waiting; only the job's last checkpoint waits for the
 *   acknowledgements, so a crash may lose some.
 * - `"at-least-once"`: every send is acknowledged before a checkpoint completes; a restore may repeat records.
 * - `"exactly-once"`: Kafka transactions tied to checkpoints; `read_committed` consumers see each record once.
 *
 * @example
 * ```ts
 * const guarantee: DeliveryGuarantee = "exactly-once";
 * ```
 */
export type DeliveryGuarantee = "none" | "at-least-once" | "exactly-once";

/**
 * The headers a {@link KafkaSink} writes for a record: by name (a repeated name as an array of its
 * values, in a row) or, to keep any order and repetition, as `[name, value]` pairs in order — a
 * source record's `headerList` as it is. A `null` value is Kafka's null header value.
 *
 * @example
 * ```ts
 * const byName: KafkaSinkHeaders = { "trace-id": "4bf92f35", tag: ["a", "b"], empty: null };
 * const inOrder: KafkaSinkHeaders = [["rep", "1"], ["other", null], ["rep", "2"]];
 * ```
 */
export type KafkaSinkHeaders =
  | Readonly<Record<string, string | Buffer | null | ReadonlyArray<string | Buffer | null>>>
  | ReadonlyArray<readonly [name: string, value: string | Buffer | null]>;

/**
 * What a custom partitioner is given.
 *
 * @example
 * ```ts
 * const byRegion = ({ partitionCount, value }: PartitionerInput) => (value?.[0] ?? 0) % partitionCount;
 * ```
 */
export interface PartitionerInput {
  readonly topic: string;
  readonly partitionCount: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

/**
 * The options of a {@link KafkaSink}, with the Java producer's settings it offers
 * ({@link KafkaProducerSettings}: `batchSize`, `maxRequestSize`, `deliveryTimeoutMs` …).
 *
 * @example
 * ```ts
 * const options: KafkaSinkOptions<Order> = {
 *   brokers: ["localhost:9092"], topic: "orders-out", key: { serialize: (o) => o.id },
 *   deliveryGuarantee: "exactly-once", transactionalIdPrefix: "orders-job-out",
 * };
 * ```
 */
export interface KafkaSinkOptions<IN> extends KafkaProducerSettings {
  /** Bootstrap brokers. Give either `brokers` or `kafka`. */
  readonly brokers?: readonly string[];
  /** A kafkajs client of your own (TLS, SASL, retry settings are taken from it). */
  readonly kafka?: Kafka;
  /** Client id sent to the brokers when `brokers` is used (default `onceflow`). */
  readonly clientId?: string;
  /** The topic to write to, or a function choosing it per record (Flink's `setTopicSelector`). */
  readonly topic: string | ((value: IN) => string);
  /** Key serializer (default: no key). */
  readonly key?: Serializer<IN>;
  /** Value serializer (default: strings and Buffers as they are, anything else as JSON). */
  readonly value?: Serializer<IN>;
  /**
   * Headers per record: by name, or in order as `[name, value]` pairs (names may repeat, values may
   * be `null`); `(record) => record.headerList` passes a source record's headers on unchanged.
   */
  readonly headers?: (value: IN) => KafkaSinkHeaders;
  /** The record timestamp (default: the time of sending, Kafka's CreateTime). */
  readonly timestamp?: (value: IN) => number;
  /** Chooses a partition (default: murmur2 of the key as the Java client does, round-robin without key). */
  readonly partitioner?: (input: PartitionerInput) => number;
  /** Default `"at-least-once"` (Flink's default is `NONE`). */
  readonly deliveryGuarantee?: DeliveryGuarantee;
  /**
   * Required for exactly-once: the prefix of this sink's transactional ids
   * (`prefix-subtask-incarnation-slot`). Must be unique per sink and job across the cluster (and no
   * other sink's prefix followed by `-<digits>`), and stable across restarts.
   */
  readonly transactionalIdPrefix?: string;
  /** Transactional ids per subtask (default 5): enough for the checkpoints a restore may still need. */
  readonly transactionalIdPoolSize?: number;
  /**
   * Kafka's `transaction.timeout.ms` for the sink's transactions (default 900000 = 15 min). Must
   * not exceed the brokers' `transaction.max.timeout.ms` and must exceed the checkpoint interval
   * plus the longest expected downtime: a transaction older than this is aborted by the broker and
   * its data is lost (reported as `TRANSACTION_TIMED_OUT`).
   */
  readonly transactionTimeout?: number;
  /** The job's checkpoint interval, when the runtime does not tell it: `transactionTimeout` is checked against it. */
  readonly checkpointInterval?: number;
  /** Log and skip data lost to a transaction timeout instead of failing (default false). */
  readonly ignoreFailuresAfterTransactionTimeout?: boolean;
  /**
   * How long a partition's batch that is not full waits for more records before it is sent
   * (Kafka's `linger.ms`; 0 sends as soon as the partition has no request in flight). Exactly-once
   * defaults to 100 (Kafka Streams' default for its producers): records are visible only at the
   * commit, so lingering delays nothing a reader sees, and fewer, larger Produce requests cost the
   * broker and the job less CPU per record when records arrive slower than the broker answers.
   * At-least-once and none default to 5 (the Java producer's): their records are visible once
   * acknowledged. A checkpoint's pre-commit sends every batch at once (under none only the last).
   */
  readonly lingerMs?: number;
  /**
   * How each record batch is compressed, as the Java producer's `compression.type`: `"none"`
   * (default), `"gzip"`, `"snappy"`, `"lz4"` or `"zstd"`, written so the Java consumer, librdkafka
   * and this connector's source read it. The codecs ship with the connector. A batch is sealed at
   * its size before compression.
   */
  readonly compression?: CompressionType;
  /** Commit retries with backoff (default 10 attempts, 200 ms doubling to 10 s). */
  readonly commitRetry?: CommitRetryOptions;
  /** Shown in logs and errors (default `KafkaSink`). */
  readonly name?: string;
}
