/**
 * Every use of kafkajs internals lives in this folder (`internal/kafkajs`), and every cast to them
 * is made here or in `produce-cluster.ts`, which gives the connector's produce path
 * (`idempotent-producer.ts` and its codecs) the narrow `ProduceCluster` it needs, except
 * kafkajs's old message-set decoder (`legacy-message-set.ts`), which the Fetch decoder
 * (`record-batch-decoder.ts`) uses, and a connection's reading of responses (`whole-responses.ts`)
 * and its default socket factory (`response-socket.ts`).
 *
 * kafkajs 2.2.4 (pinned exactly, unmaintained) hides what an exactly-once connector needs:
 * - its cluster and broker objects (raw Fetch, EndTxn, InitProducerId, OffsetCommit),
 * - the transaction manager (`src/producer/eosManager`), whose producer id and epoch the public
 *   producer never shows.
 * If a kafkajs upgrade breaks one of these, this file is the only place to fix.
 */
import type { ICustomPartitioner, Kafka } from "kafkajs";
import {
  IdempotentProducer,
  type IdempotentProducerOptions,
  type ProduceCluster,
  type ProducerMessage,
  type TopicMessages,
} from "../../producer/idempotent-producer.js";
import type { CompressionType } from "../../protocol/compression/compression-codec.js";
import {
  decodeFetchV11,
  type FetchedPartition,
  type FetchResponse,
  fetchedPartitions,
  partitionKey,
} from "../../protocol/fetch-response.js";
import { kafkajsModule } from "./kafkajs-loader.js";
import { type KafkajsConnection, produceClusterOf, RETRY_DEFAULTS } from "./produce-cluster.js";
import { type ResponseReadingConnection, readResponsesWhole } from "./whole-responses.js";

// Fetch responses are decoded in `fetch-response.ts` and `record-batch-decoder.ts`.
export {
  type DecodedMessage,
  type FetchedPartition,
  ownHeaders,
  withoutAborted,
} from "../../protocol/fetch-response.js";
export {
  HEADER_LIST,
  NO_HEADERS,
  offsetAfter,
  type RawOffset,
  type RawRecord,
  RecordColumns,
  viewsOf,
} from "../../protocol/record-batch-decoder.js";

/** A request as kafkajs' protocol modules build it: encoder, decoder/parser and timeout. */
interface ProtocolRequest {
  request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<unknown> };
  response: { decode(raw: Buffer): Promise<unknown>; parse(decoded: unknown): Promise<unknown> };
  requestTimeout?: number;
}

interface InternalBroker {
  lookupRequest(apiKey: number, definition: unknown): (request: Record<string, unknown>) => ProtocolRequest;
  disconnect(): Promise<void>;
  fetch(request: {
    replicaId: number;
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: Array<{
      topic: string;
      partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }>;
    }>;
  }): Promise<FetchResponse>;
  endTxn(request: {
    transactionalId: string;
    producerId: string;
    producerEpoch: number;
    transactionResult: boolean;
  }): Promise<unknown>;
  offsetCommit(request: {
    groupId: string;
    groupGenerationId: number;
    memberId: string;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>;
  }): Promise<{ responses: Array<{ partitions: Array<{ errorCode: number }> }> }>;
}

/** A raw request kafkajs sends as is; the body is written after kafkajs's (v1) request header. */
interface RawProtocolRequest {
  request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<unknown> };
  response: {
    decode(payload: Buffer): Promise<{ payload: Buffer }>;
    parse(decoded: { payload: Buffer }): Promise<Buffer>;
  };
}

interface InternalCluster {
  connect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadataIfNecessary(): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number; leader: number | null }>;
  getNodeIds(): number[];
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  /** The topics kafkajs loads metadata for: every refresh fails while one of them does not exist. */
  targetTopics: Set<string>;
  brokerPool: {
    withBroker<T>(
      call: (options: { broker: { metadata(topics: string[]): Promise<MetadataResponse> } }) => Promise<T>,
    ): Promise<T>;
  };
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(query: { nodeId: string | number }): Promise<InternalBroker & InternalBrokerPool>;
  findGroupCoordinator(query: {
    groupId: string;
    coordinatorType: number;
  }): Promise<InternalBroker & InternalBrokerPool>;
}

interface InternalBrokerPool {
  connectionPool: {
    send(request: RawProtocolRequest): Promise<Buffer>;
    getConnection(
      index?: number,
    ): Promise<
      KafkajsConnection & ResponseReadingConnection & { send(request: RawProtocolRequest): Promise<unknown> }
    >;
  };
}

interface MetadataResponse {
  topicMetadata: Array<{ topic: string }>;
}

interface InternalLogger {
  namespace(name: string): unknown;
}

interface EosManager {
  initProducerId(): Promise<void>;
  addPartitionsToTransaction(
    topicData: Array<{ topic: string; partitions: Array<{ partition: number }> }>,
  ): Promise<void>;
  beginTransaction(): void;
  getProducerId(): string;
  getProducerEpoch(): number;
}

type CreateEosManager = (options: {
  logger: unknown;
  cluster: InternalCluster;
  transactionTimeout: number;
  transactional: boolean;
  transactionalId: string;
}) => EosManager;

// The one place where kafkajs internals are loaded (on first use: kafkajs-loader.ts) and typed.
const createEosManager = kafkajsModule<CreateEosManager>("kafkajs/src/producer/eosManager");
const KafkajsEncoder = kafkajsModule<new () => { writeBuffer(value: Buffer): unknown }>(
  "kafkajs/src/protocol/encoder",
);
const apiKeys = kafkajsModule<{ Fetch: number }>("kafkajs/src/protocol/requests/apiKeys");
const requestDefinitions = kafkajsModule<{ requests: { Fetch: unknown } }>("kafkajs/src/protocol/requests");
const protocolErrors = kafkajsModule<{
  createErrorFromCode(code: number): Error & { type: string; retriable: boolean; code: number };
}>("kafkajs/src/protocol/error");

// kafkajs's own producer default.
const METADATA_MAX_AGE_MS = 300_000;
// kafkajs's default; InitProducerId without a transactional id ignores it.
const DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000;
const TRANSACTION_COORDINATOR = 1;
/** The connection of a broker's pool that kafkajs sends Fetch requests on (`connectionPool.js`). */
const FETCH_CONNECTION = 1;
const GROUP_COORDINATOR = 0;
const READ_COMMITTED = 1;
const READ_UNCOMMITTED = 0;

function privateMember<T>(kafka: Kafka, description: string): T {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === description);
  if (symbol === undefined) {
    throw new Error(
      `kafkajs internals changed: the Kafka client has no '${description}'. @onceflow/connector-kafka needs kafkajs 2.2.4 exactly.`,
    );
  }
  return (kafka as unknown as Record<symbol, T>)[symbol] as T;
}

/** The `retry` option of a kafkajs client, as its constructor took it. */
export interface KafkajsRetry {
  readonly retries?: number;
  readonly initialRetryTime?: number;
  readonly maxRetryTime?: number;
  readonly multiplier?: number;
}

/** The `retry` option `kafka` was made with (kafkajs keeps it private), if any. */
export function clientRetryOf(kafka: Kafka): KafkajsRetry | undefined {
  const retry = privateMember<KafkajsRetry | undefined>(kafka, "private:Kafka:clusterRetry");
  return typeof retry === "object" && retry !== null ? retry : undefined;
}

/**
 * A connection to the cluster below the public kafkajs API: raw requests to brokers and
 * coordinators, with the client's own configuration (brokers, TLS, SASL, retry).
 */
export class KafkaConnection {
  private readonly cluster: InternalCluster;
  private readonly logger: InternalLogger;

  constructor(kafka: Kafka, options: { readCommitted?: boolean } = {}) {
    const createCluster = privateMember<(options: Record<string, unknown>) => InternalCluster>(
      kafka,
      "private:Kafka:createCluster",
    );
    this.cluster = createCluster({
      allowAutoTopicCreation: false,
      isolationLevel: options.readCommitted === false ? READ_UNCOMMITTED : READ_COMMITTED,
      // Without it kafkajs treats its metadata as always stale and sends a Metadata request before
      // every Produce (about one per thousand records). Errors such as NOT_LEADER still refresh it.
      metadataMaxAge: METADATA_MAX_AGE_MS,
    });
    this.logger = privateMember<InternalLogger>(kafka, "private:Kafka:logger");
  }

  async connect(): Promise<void> {
    await this.cluster.connect();
  }

  async disconnect(): Promise<void> {
    await this.cluster.disconnect();
  }

  /**
   * Loads metadata for `topics`. `leaderOf(topic, partition)` is the node id of the partition's
   * leader, -1 while it has none (an election), or undefined when the cluster has no such topic or
   * partition (deleted). A missing topic fails no lookup of the others.
   */
  async leaders(
    topics: string[],
    refresh: boolean,
  ): Promise<(topic: string, partition: number) => number | undefined> {
    const missing = new Set<string>();
    try {
      if (refresh) await this.cluster.refreshMetadata();
      await this.cluster.addMultipleTargetTopics(topics);
    } catch (error) {
      if (kafkaErrorType(error) !== "UNKNOWN_TOPIC_OR_PARTITION") throw error;
      // kafkajs asks for all its target topics at once, and fails them all for one deleted topic:
      // the topics that exist now are listed, the others left out of its targets.
      const existing = new Set(
        (await this.cluster.brokerPool.withBroker(({ broker }) => broker.metadata([]))).topicMetadata.map(
          (t) => t.topic,
        ),
      );
      for (const topic of [...this.cluster.targetTopics, ...topics]) {
        if (existing.has(topic)) continue;
        missing.add(topic);
        this.cluster.targetTopics.delete(topic);
      }
      await this.cluster.refreshMetadata();
      await this.cluster.addMultipleTargetTopics(topics.filter((t) => !missing.has(t)));
    }
    return (topic, partition) => {
      if (missing.has(topic)) return undefined;
      const metadata = this.cluster
        .findTopicPartitionMetadata(topic)
        .find((p) => p.partitionId === partition);
      if (metadata === undefined) return undefined;
      return metadata.leader === null || metadata.leader < 0 ? -1 : metadata.leader;
    };
  }

  /**
   * One Fetch request to one broker. Returns per partition the visible records (aborted ones and
   * control records removed, as kafkajs' consumer does) and the offset to fetch next, which also
   * moves past batches made only of control or aborted records. A partition that failed (offset
   * out of range, not the leader, deleted …) comes back in `failed` with kafkajs's error for its
   * code; the others' records are returned all the same.
   */
  async fetch(
    nodeId: number,
    request: {
      readCommitted: boolean;
      maxWaitTime: number;
      maxBytes: number;
      maxBytesPerPartition: number;
      partitions: Array<{ topic: string; partition: number; fetchOffset: bigint }>;
    },
  ): Promise<{
    fetched: FetchedPartition[];
    failed: Array<{ topic: string; partition: number; error: KafkaProtocolError }>;
  }> {
    const broker = await this.cluster.findBroker({ nodeId });
    const topics = new Map<string, Array<{ partition: number; fetchOffset: string; maxBytes: number }>>();
    const requested = new Map<string, bigint>();
    for (const p of request.partitions) {
      const list = topics.get(p.topic) ?? [];
      list.push({
        partition: p.partition,
        fetchOffset: p.fetchOffset.toString(),
        maxBytes: request.maxBytesPerPartition,
      });
      topics.set(p.topic, list);
      requested.set(partitionKey(p.topic, p.partition), p.fetchOffset);
    }
    const response = await fetchWithBatchEnds(
      broker,
      {
        replicaId: -1,
        isolationLevel: request.readCommitted ? READ_COMMITTED : READ_UNCOMMITTED,
        maxWaitTime: request.maxWaitTime,
        minBytes: 1,
        maxBytes: request.maxBytes,
        topics: [...topics].map(([topic, partitions]) => ({ topic, partitions })),
        rackId: "",
      },
      requested,
    );
    const { fetched, failed } = fetchedPartitions(response, requested);
    return {
      fetched,
      failed: failed.map(({ topic, partition, errorCode }) => ({
        topic,
        partition,
        error: protocolErrors().createErrorFromCode(errorCode),
      })),
    };
  }

  /**
   * Commits offsets to a consumer group as a client outside the group (generation -1), as Flink's
   * KafkaSource does: the group needs no members, so no rebalance is ever involved.
   */
  async commitGroupOffsets(
    groupId: string,
    offsets: Array<{ topic: string; partition: number; offset: bigint }>,
  ): Promise<void> {
    if (offsets.length === 0) return;
    const coordinator = await this.cluster.findGroupCoordinator({
      groupId,
      coordinatorType: GROUP_COORDINATOR,
    });
    const topics = new Map<string, Array<{ partition: number; offset: string }>>();
    for (const o of offsets) {
      const list = topics.get(o.topic) ?? [];
      list.push({ partition: o.partition, offset: o.offset.toString() });
      topics.set(o.topic, list);
    }
    await coordinator.offsetCommit({
      groupId,
      groupGenerationId: -1,
      memberId: "",
      topics: [...topics].map(([topic, partitions]) => ({ topic, partitions })),
    });
  }

  /**
   * Starts a transaction on `transactionalId`: InitProducerId (which aborts whatever was open on the
   * id and bumps its epoch), then a producer bound to that producer id and epoch: the one of
   * `idempotent-producer.ts` (records batched per partition, several requests in flight,
   * everything acknowledged at `flush`). `mapFailure` turns a failed send into the error to throw.
   */
  async beginTransaction(
    options: ProducerStartOptions & { transactionalId: string; transactionTimeout: number },
  ): Promise<OpenTransaction> {
    const eosManager = this.transactionManager(options.transactionalId, options.transactionTimeout);
    await eosManager.initProducerId();
    eosManager.beginTransaction();
    const handle = {
      transactionalId: options.transactionalId,
      producerId: eosManager.getProducerId(),
      producerEpoch: eosManager.getProducerEpoch(),
    };
    return { ...handle, ...this.producerOf(eosManager, handle.transactionalId, options) };
  }

  /**
   * An idempotent producer outside transactions (at-least-once, none): InitProducerId without a
   * transactional id, then the same produce path as a transaction's. Its records are visible once
   * acknowledged; its sequence numbers keep each partition's batches in order and a resent batch
   * once, for as long as the producer lives.
   */
  async startIdempotentProducer(options: ProducerStartOptions): Promise<IdempotentProducerHandle> {
    const eosManager = this.transactionManager(null, DEFAULT_TRANSACTION_TIMEOUT_MS);
    await eosManager.initProducerId();
    return {
      producerId: eosManager.getProducerId(),
      producerEpoch: eosManager.getProducerEpoch(),
      ...this.producerOf(eosManager, null, options),
    };
  }

  /** kafkajs's transaction manager for `transactionalId`; `null`: an idempotent producer's. */
  private transactionManager(transactionalId: string | null, transactionTimeout: number): EosManager {
    return createEosManager()({
      logger: this.logger.namespace("OnceflowKafkaSink"),
      cluster: this.cluster,
      transactionTimeout,
      transactional: transactionalId !== null,
      // kafkajs sends no transactional id in InitProducerId when not transactional.
      transactionalId: transactionalId ?? "",
    });
  }

  /** The produce path bound to the producer id and epoch `eosManager` holds. */
  private producerOf(
    eosManager: EosManager,
    transactionalId: string | null,
    options: ProducerStartOptions,
  ): Omit<IdempotentProducerHandle, "producerId" | "producerEpoch"> {
    const producer = new IdempotentProducer({
      transactionalId,
      producerId: BigInt(eosManager.getProducerId()),
      producerEpoch: eosManager.getProducerEpoch(),
      retry: RETRY_DEFAULTS,
      ...options.settings,
      ...options.tuning,
      ...(options.lingerMs === undefined ? {} : { lingerMs: options.lingerMs }),
      ...(options.compression === undefined ? {} : { compression: options.compression }),
      cluster: (options.wrapCluster ?? ((cluster) => cluster))(produceClusterOf(this.cluster, eosManager)),
      partitioner: options.partitioner() as IdempotentProducerOptions["partitioner"],
      mapFailure: options.mapFailure,
    });
    return {
      send: (topicMessages) => producer.send(topicMessages),
      flush: () => producer.flush(),
      throwIfFailed: () => producer.throwIfFailed(),
      close: () => producer.close(),
    };
  }

  /**
   * Fences `transactionalId`: InitProducerId aborts the transaction left open on it (a crashed or
   * frozen writer's) and bumps the epoch, so the old writer can neither write nor commit.
   */
  async fence(transactionalId: string, transactionTimeout: number): Promise<void> {
    await this.transactionManager(transactionalId, transactionTimeout).initProducerId();
  }

  /** The node ids of every broker in fresh metadata. */
  async brokerNodeIds(): Promise<number[]> {
    await this.cluster.refreshMetadata();
    return this.cluster.getNodeIds();
  }

  /**
   * Sends a request kafkajs has no encoder for — to one broker, or to the transaction coordinator
   * of a transactional id — and returns the response after its correlation id. `body` follows
   * kafkajs's request header (v1); see `admin/transactions-protocol.ts` for flexible versions.
   */
  async sendRaw(
    target: { readonly nodeId: number } | { readonly coordinatorOf: string },
    request: {
      readonly apiKey: number;
      readonly apiVersion: number;
      readonly apiName: string;
      readonly body: Buffer;
    },
  ): Promise<Buffer> {
    const broker =
      "nodeId" in target
        ? await this.cluster.findBroker({ nodeId: target.nodeId })
        : await this.cluster.findGroupCoordinator({
            groupId: target.coordinatorOf,
            coordinatorType: TRANSACTION_COORDINATOR,
          });
    const { apiKey, apiVersion, apiName, body } = request;
    return broker.connectionPool.send({
      request: {
        apiKey,
        apiVersion,
        apiName,
        encode: async () => new (KafkajsEncoder())().writeBuffer(body),
      },
      response: { decode: async (payload) => ({ payload }), parse: async ({ payload }) => payload },
    });
  }

  /**
   * EndTxn with an explicit transactional id, producer id and epoch: the only way to commit a
   * transaction that another (killed) process pre-committed. The coordinator accepts it from any
   * connection and answers NONE when the transaction is already committed.
   */
  async endTransaction(
    handle: { transactionalId: string; producerId: string; producerEpoch: number },
    commit: boolean,
  ): Promise<void> {
    const coordinator = await this.cluster.findGroupCoordinator({
      groupId: handle.transactionalId,
      coordinatorType: TRANSACTION_COORDINATOR,
    });
    await coordinator.endTxn({
      transactionalId: handle.transactionalId,
      producerId: handle.producerId,
      producerEpoch: handle.producerEpoch,
      transactionResult: commit,
    });
  }
}

/**
 * A Fetch through kafkajs' own request (the version it negotiated), decoding v11 responses with the
 * lean decoder (`fetch-response.ts`): records straight from the response buffer, filtered by the
 * offsets asked for and by aborted transactions, and the end of the last whole batch of each
 * partition (kafkajs's decoder drops batches without records, and with them the offsets they
 * cover). Other versions (brokers before Kafka 2.3) keep kafkajs' decoder.
 */
async function fetchWithBatchEnds(
  broker: InternalBroker & InternalBrokerPool,
  request: Record<string, unknown>,
  requested: ReadonlyMap<string, bigint>,
): Promise<FetchResponse> {
  const protocolRequest = broker.lookupRequest(apiKeys().Fetch, requestDefinitions().requests.Fetch)(request);
  // Partition errors are read per partition by `fetchedPartitions`; kafkajs's `parse` would throw
  // the first one for the whole response.
  const keep = async (decoded: unknown) => decoded;
  protocolRequest.response =
    protocolRequest.request.apiVersion === 11
      ? { decode: (raw) => decodeFetchV11(raw, requested), parse: keep }
      : { decode: protocolRequest.response.decode, parse: keep };
  try {
    // kafkajs's pool sends a Fetch on its second connection; its responses are read whole here.
    const connection = await broker.connectionPool.getConnection(FETCH_CONNECTION);
    readResponsesWhole(connection);
    return (await connection.send(
      protocolRequest as unknown as RawProtocolRequest,
    )) as unknown as FetchResponse;
  } catch (error) {
    // As kafkajs' broker does: a closed connection is reopened by the next request.
    if ((error as { name?: unknown }).name === "KafkaJSConnectionClosedError") await broker.disconnect();
    throw error;
  }
}

/** How {@link KafkaConnection.beginTransaction} and `startIdempotentProducer` set up their producer. */
export interface ProducerStartOptions {
  readonly partitioner: ICustomPartitioner;
  readonly mapFailure: (error: unknown, records: TopicMessages[]) => unknown;
  /** How long a partition's batch that is not full waits for more records (`linger.ms`). */
  readonly lingerMs?: number;
  /** How each batch is compressed (`compression.type`, default none). */
  readonly compression?: CompressionType;
  /** The sink's producer settings (`batchSize`, `requestTimeoutMs` …); kafkajs's retry defaults without. */
  readonly settings?: Pick<
    IdempotentProducerOptions,
    | "batchBytes"
    | "maxRequestBytes"
    | "maxInFlightRequestsPerBroker"
    | "requestTimeoutMs"
    | "deliveryTimeoutMs"
    | "retry"
  >;
  /** Tests only: smaller batches or buffers, and faults injected between producer and cluster. */
  readonly tuning?: Pick<
    IdempotentProducerOptions,
    "batchBytes" | "maxBufferedBytes" | "maxInFlightRequestsPerBroker"
  >;
  readonly wrapCluster?: (cluster: ProduceCluster) => ProduceCluster;
}

/** A producer started by {@link KafkaConnection.startIdempotentProducer}. */
export interface IdempotentProducerHandle {
  readonly producerId: string;
  readonly producerEpoch: number;
  /** Hands records over; returns before they are acknowledged. Throws an earlier send's failure. */
  send(topicMessages: ReadonlyArray<{ topic: string; messages: readonly ProducerMessage[] }>): Promise<void>;
  /** Waits until every record sent is acknowledged; throws the first failure. */
  flush(): Promise<void>;
  /** Throws the failure of an earlier send, if one failed; waits for nothing. */
  throwIfFailed(): void;
  /** Sends nothing more and waits for the requests in flight; never throws. */
  close(): Promise<void>;
}

/** A transaction started by {@link KafkaConnection.beginTransaction}. */
export interface OpenTransaction extends IdempotentProducerHandle {
  readonly transactionalId: string;
}

/** The protocol error name kafkajs gives a broker error (`INVALID_PRODUCER_EPOCH` …), if any. */
export function kafkaErrorType(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const candidate = current as { type?: unknown; originalError?: unknown; cause?: unknown };
    if (typeof candidate.type === "string") return candidate.type;
    current = candidate.originalError ?? candidate.cause;
  }
  return undefined;
}

/** A broker's error code as kafkajs names it: `type` (`NOT_LEADER_OR_FOLLOWER` …) and whether a retry may help. */
export interface KafkaProtocolError extends Error {
  readonly type: string;
  readonly code: number;
  readonly retriable: boolean;
}
