import {
  ConfigurationError,
  type CrossProcessExchange,
  type ExchangeChannel,
  type ExchangeChannelSpec,
  type ExchangeRecord,
  type Logger,
  type RecordSerializer,
  type Source,
  type SourceBatch,
  type SourceReader,
  type SourceReaderContext,
  type SourceSplit,
  type SplitEnumeratorContext,
} from "@onceflow/core";
import type { Admin, Kafka } from "kafkajs";
import { type ClientOptions, lazyKafkaClientOf, validateClientOptions } from "../internal/client.js";
import type { CompressionType } from "../protocol/compression/compression-codec.js";
import { KafkaSink } from "../sink/kafka-sink.js";
import { Deserializers } from "../source/deserializer.js";
import type { KafkaPartitionSplit } from "../source/kafka-partition-split.js";
import type { KafkaRecord } from "../source/kafka-record.js";
import { KafkaSource } from "../source/kafka-source.js";
import {
  exchangeRecordOf,
  headersOf,
  jsonCodec,
  keyGroupKey,
  keyGroupOfKey,
  type RepartitionCodec,
} from "./repartition-records.js";

/**
 * The options of {@link kafkaRepartitionExchange}.
 *
 * @example
 * ```ts
 * const options: KafkaRepartitionExchangeOptions = { brokers: ["kafka:9092"], replicationFactor: 3 };
 * ```
 */
export interface KafkaRepartitionExchangeOptions extends ClientOptions {
  /**
   * The start of each repartition topic's name (default `onceflow-repartition-`): the topic of the
   * exchange before keyed operator `uid` of job `jobId` is `<topicPrefix><jobId>-<uid>`.
   */
  readonly topicPrefix?: string;
  /** Replicas of each partition when the topic is created (default: the brokers' `default.replication.factor`). */
  readonly replicationFactor?: number;
  /** Topic settings when the topic is created, e.g. `{ "min.insync.replicas": "2" }`. */
  readonly topicConfig?: Readonly<Record<string, string>>;
  /**
   * How values cross the topic (default JSON: see {@link RepartitionCodec} for what survives). A
   * `keyBy` given a `serializer` uses that instead.
   */
  readonly codec?: RepartitionCodec;
  /**
   * Delete what every keyed subtask has read once the checkpoint that covers it completes (Kafka's
   * DeleteRecords, as Kafka Streams does for its repartition topics), so the topic stays about one
   * checkpoint interval long. Default true.
   */
  readonly purge?: boolean;
  /** Kafka's `transaction.timeout.ms` for the sending side's transactions (see `KafkaSinkOptions`). */
  readonly transactionTimeout?: number;
  /** Record batch compression on the topic (default `"none"`). */
  readonly compression?: CompressionType;
}

const DEFAULT_TOPIC_PREFIX = "onceflow-repartition-";

/**
 * A `keyBy` exchange between processes through Kafka — what Kafka Streams does with its
 * repartition topics. Give it as the job option `exchange` when each process runs one subtask
 * (`subtaskIndex`). The sending side writes each record with the exactly-once Kafka sink into the
 * partition of its key group (the topic has `maxParallelism` partitions), pre-committed at
 * checkpoint N and committed when N completes; the keyed side reads the partitions of the key
 * groups it owns `read_committed`, with their offsets in its checkpoint, so a rescale moves each
 * key group's offset with its state. The topic is created when missing; what was read is deleted
 * after the checkpoint covering it completes. Cost: one more hop, about one checkpoint interval of
 * latency (records are visible when their checkpoint completes).
 *
 * @example
 * ```ts
 * const job = new Job({
 *   jobId: "clicks", parallelism: 3, subtaskIndex: Number(process.env.ORDINAL),
 *   checkpointing: { interval: 1000 },
 *   exchange: kafkaRepartitionExchange({ brokers: ["kafka:9092"], replicationFactor: 3 }),
 * });
 * ```
 */
export function kafkaRepartitionExchange(options: KafkaRepartitionExchangeOptions): CrossProcessExchange {
  validateClientOptions(options);
  const replicationFactor = options.replicationFactor;
  if (replicationFactor !== undefined && (!Number.isInteger(replicationFactor) || replicationFactor < 1)) {
    throw new ConfigurationError("replicationFactor", `must be a positive integer, got ${replicationFactor}`);
  }
  const prefix = options.topicPrefix ?? DEFAULT_TOPIC_PREFIX;
  const kafka = lazyKafkaClientOf(options);
  return {
    name: "kafka repartition topic",
    channel: (spec) => repartitionChannel(options, kafka, `${prefix}${spec.jobId}-${spec.keyedUid}`, spec),
  };
}

/** The name of the repartition topic of the exchange before `keyedUid` (for tools and tests). */
export function repartitionTopicName(
  jobId: string,
  keyedUid: string,
  topicPrefix = DEFAULT_TOPIC_PREFIX,
): string {
  return `${topicPrefix}${jobId}-${keyedUid}`;
}

/** The `keyBy`'s serializer as the topic's codec: it knows the records better than the exchange's. */
function serializerCodec(serializer: RecordSerializer<unknown>): RepartitionCodec {
  return {
    serialize: (value) => {
      const bytes = serializer.serialize(value);
      return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    deserialize: (bytes) => serializer.deserialize(bytes),
  };
}

function repartitionChannel(
  options: KafkaRepartitionExchangeOptions,
  kafka: () => Kafka,
  topic: string,
  spec: ExchangeChannelSpec,
): ExchangeChannel {
  const codec =
    spec.serializer === undefined ? (options.codec ?? jsonCodec) : serializerCodec(spec.serializer);
  let created: Promise<void> | undefined;
  const ensureTopic = (logger: Logger | undefined): Promise<void> => {
    created ??= createTopicIfMissing(kafka(), topic, spec.maxParallelism, options, logger).catch((error) => {
      created = undefined;
      throw error;
    });
    return created;
  };
  const client = options.kafka === undefined ? { brokers: options.brokers! } : { kafka: options.kafka };
  const source = new KafkaSource<Buffer, unknown, string>({
    ...client,
    ...(options.clientId === undefined ? {} : { clientId: options.clientId }),
    topics: [topic],
    startingOffsets: "earliest",
    readCommitted: true,
    key: Deserializers.buffer(),
    value: { deserialize: (bytes) => codec.deserialize(bytes) },
    headers: Deserializers.string(),
    // The topic never gains partitions: it has one per key group.
    partitionDiscoveryIntervalMs: 0,
  });
  const purge = options.purge ?? true;
  const channelSource: Source<ExchangeRecord, KafkaPartitionSplit> = {
    name: `kafka repartition topic '${topic}'`,
    boundedness: "continuous",
    splitSerializer: source.splitSerializer,
    discoverSplits: async (context: SplitEnumeratorContext) => {
      await ensureTopic(context.logger);
      return source.discoverSplits(context);
    },
    createReader: (context: SourceReaderContext) =>
      new RepartitionReader(source.createReader(context), purge ? kafka() : undefined, topic, context.logger),
  };
  return {
    source: channelSource as Source<ExchangeRecord, SourceSplit>,
    keyGroupOf: (split) => (split as KafkaPartitionSplit).partition,
    createSink: () => {
      const sink = new KafkaSink<ExchangeRecord>({
        ...client,
        ...(options.clientId === undefined ? {} : { clientId: options.clientId }),
        name: `kafka repartition topic '${topic}'`,
        topic,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: topic,
        key: { serialize: keyGroupKey },
        value: { serialize: (record) => (record.kind === "data" ? codec.serialize(record.value) : null) },
        headers: headersOf,
        partitioner: ({ key }) => keyGroupOfKey(key),
        ...(options.transactionTimeout === undefined
          ? {}
          : { transactionTimeout: options.transactionTimeout }),
        ...(options.compression === undefined ? {} : { compression: options.compression }),
      });
      const open = sink.open.bind(sink);
      sink.open = async (context) => {
        await ensureTopic(undefined);
        await open(context);
      };
      return sink;
    },
  };
}

/**
 * Reads the key groups of one keyed subtask and, once a checkpoint completes, deletes from each
 * partition what that checkpoint's offsets cover: a restore never goes behind the latest
 * completed checkpoint, so nothing deleted is needed again.
 */
class RepartitionReader implements SourceReader<ExchangeRecord, KafkaPartitionSplit> {
  private readonly pendingPurges = new Map<number, Array<{ partition: number; offset: string }>>();
  private purging: Promise<void> = Promise.resolve();

  constructor(
    private readonly inner: SourceReader<KafkaRecord<Buffer, unknown, string>, KafkaPartitionSplit>,
    private readonly kafka: Kafka | undefined,
    private readonly topic: string,
    private readonly logger: Logger,
  ) {}

  start(): Promise<void> | void {
    return this.inner.start?.();
  }

  addSplits(splits: KafkaPartitionSplit[]): Promise<void> | void {
    return this.inner.addSplits(splits);
  }

  async pollNext(): Promise<SourceBatch<ExchangeRecord> | undefined> {
    const batch = await this.inner.pollNext();
    if (!batch) return undefined;
    const records = batch.records;
    const out = new Array<ExchangeRecord>(records.length);
    for (let index = 0; index < records.length; index++) out[index] = exchangeRecordOf(records[index]!);
    return { splitId: batch.splitId, records: out };
  }

  isAvailable(): Promise<void> {
    return this.inner.isAvailable();
  }

  isFinished(): boolean {
    return this.inner.isFinished();
  }

  snapshotState(checkpointId: number): KafkaPartitionSplit[] {
    const splits = this.inner.snapshotState(checkpointId);
    if (this.kafka !== undefined) {
      const offsets = splits.flatMap((split) =>
        split.nextOffset === undefined ? [] : [{ partition: split.partition, offset: split.nextOffset }],
      );
      if (offsets.length > 0) this.pendingPurges.set(checkpointId, offsets);
    }
    return splits;
  }

  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    await this.inner.notifyCheckpointComplete?.(checkpointId);
    // The newest snapshot at or below the completed checkpoint covers every older one.
    let covered: Array<{ partition: number; offset: string }> | undefined;
    for (const [id, offsets] of [...this.pendingPurges]) {
      if (id > checkpointId) continue;
      covered = offsets;
      this.pendingPurges.delete(id);
    }
    if (covered === undefined || this.kafka === undefined) return;
    // Off the subtask's loop: a slow or failed purge only leaves the topic longer for a while.
    const partitions = covered;
    const kafka = this.kafka;
    this.purging = this.purging.then(() => purgeRecords(kafka, this.topic, partitions, this.logger));
  }

  notifyCheckpointAborted(checkpointId: number): Promise<void> | void {
    this.pendingPurges.delete(checkpointId);
    return this.inner.notifyCheckpointAborted?.(checkpointId);
  }

  async close(): Promise<void> {
    await this.purging;
    await this.inner.close();
  }
}

async function purgeRecords(
  kafka: Kafka,
  topic: string,
  partitions: ReadonlyArray<{ partition: number; offset: string }>,
  logger: Logger,
): Promise<void> {
  const admin = kafka.admin();
  try {
    await admin.connect();
    // kafkajs' deleteTopicRecords needs the topic's metadata loaded first.
    await admin.fetchTopicMetadata({ topics: [topic] });
    await admin.deleteTopicRecords({ topic, partitions: [...partitions] });
  } catch (error) {
    logger.warn(
      { topic, error: error instanceof Error ? error.message : String(error) },
      "purging read records from the repartition topic failed; the next checkpoint tries again",
    );
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

async function createTopicIfMissing(
  kafka: Kafka,
  topic: string,
  partitions: number,
  options: KafkaRepartitionExchangeOptions,
  logger: Logger | undefined,
): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    if (!(await admin.listTopics()).includes(topic)) {
      const created = await admin
        .createTopics({
          waitForLeaders: true,
          topics: [
            {
              topic,
              numPartitions: partitions,
              replicationFactor: options.replicationFactor ?? -1,
              configEntries: Object.entries(options.topicConfig ?? {}).map(([name, value]) => ({
                name,
                value,
              })),
            },
          ],
        })
        .catch((error: unknown) => {
          // Another process created it at the same moment.
          if ((error as { type?: string }).type === "TOPIC_ALREADY_EXISTS") return false;
          throw error;
        });
      if (created) logger?.info({ topic, partitions }, "repartition topic created");
    }
    const found = await partitionsWhenLed(admin, topic);
    if (found !== partitions) {
      throw new ConfigurationError(
        `repartition topic '${topic}'`,
        `has ${found} partitions but the job has ${partitions} key groups (maxParallelism), one partition each; delete the topic (it holds only records in transit) or set topicPrefix to use another`,
      );
    }
  } finally {
    await admin.disconnect();
  }
}

const LEADER_WAIT_MS = 30_000;

/**
 * The topic's partition count once every partition answers for its offsets: a topic just created
 * has partitions without a leader for a moment, and the keyed side lists offsets at once.
 */
async function partitionsWhenLed(admin: Admin, topic: string): Promise<number> {
  const deadline = Date.now() + LEADER_WAIT_MS;
  for (;;) {
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      const partitions = metadata.topics[0]?.partitions ?? [];
      if (partitions.length > 0 && partitions.every((partition) => partition.leader >= 0)) {
        await admin.fetchTopicOffsets(topic);
        return partitions.length;
      }
    } catch (error) {
      if (Date.now() >= deadline) throw error;
    }
    if (Date.now() >= deadline) return 0;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
