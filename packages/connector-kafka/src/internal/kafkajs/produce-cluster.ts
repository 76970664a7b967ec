/**
 * The bridge between the lean produce path (`idempotent-producer.ts`) and kafkajs: its cluster
 * (connections, metadata, SASL/TLS), its transaction manager (AddPartitionsToTxn) and its protocol
 * errors. Loaded from kafkajs internals like the rest of this folder (kafkajs 2.2.4, pinned).
 */

import type { ProduceCluster } from "./idempotent-producer.js";
import { kafkajsModule } from "./kafkajs-loader.js";
import { PRODUCE_API_KEY } from "./produce-request.js";

/** kafkajs's retry defaults (`src/retry/defaults.js`): the cluster the connector makes has none of its own. */
export const RETRY_DEFAULTS = { retries: 5, initialRetryTime: 300, maxRetryTime: 30_000, multiplier: 2 };

/** The parts of kafkajs's cluster the produce path uses. */
export interface ProduceClusterSource {
  connect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadata(): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number; leader: number | null }>;
  findBroker(query: { nodeId: number }): Promise<{
    disconnect(): Promise<void>;
    connectionPool: {
      send(request: {
        request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<unknown> };
        response: {
          decode(payload: Buffer): Promise<{ payload: Buffer }>;
          parse(decoded: { payload: Buffer }): Promise<Buffer>;
        };
      }): Promise<Buffer>;
    };
  }>;
}

/** The part of kafkajs's transaction manager (`producer/eosManager`) the produce path uses. */
export interface ProduceTransactionManager {
  addPartitionsToTransaction(
    topicData: Array<{ topic: string; partitions: Array<{ partition: number }> }>,
  ): Promise<void>;
}

const createRetry =
  kafkajsModule<
    (
      options: Record<string, unknown>,
    ) => <T>(run: (bail: (error: unknown) => void, retryCount: number) => Promise<T>) => Promise<T>
  >("kafkajs/src/retry");
const KafkajsEncoder = kafkajsModule<new (initialSize?: number) => { buf: Buffer; offset: number }>(
  "kafkajs/src/protocol/encoder",
);
const protocolErrors = kafkajsModule<{ createErrorFromCode(code: number): Error }>(
  "kafkajs/src/protocol/error",
);

/**
 * What the lean producer needs of the cluster, from kafkajs's cluster and transaction manager.
 *
 * @example
 * ```ts
 * const producer = new IdempotentProducer({ ...ids, cluster: produceClusterOf(cluster, eosManager), ... });
 * ```
 */
export function produceClusterOf(
  cluster: ProduceClusterSource,
  transactionManager: ProduceTransactionManager,
): ProduceCluster {
  const known = new Set<string>();
  const retrier = createRetry()({ ...RETRY_DEFAULTS });
  return {
    partitionMetadata: async (topic) => {
      if (!known.has(topic)) {
        await cluster.addMultipleTargetTopics([topic]);
        known.add(topic);
      }
      // Cheap while the metadata is younger than metadataMaxAge; picks up new partitions after.
      await cluster.refreshMetadataIfNecessary();
      let partitions = cluster.findTopicPartitionMetadata(topic);
      if (partitions.length === 0) {
        await cluster.refreshMetadata();
        partitions = cluster.findTopicPartitionMetadata(topic);
      }
      if (partitions.length === 0) {
        throw new Error(`the cluster's metadata has no partitions for topic '${topic}': does it exist?`);
      }
      return partitions as Array<{ partitionId: number; leader: number }>;
    },
    leaderOf: (topic, partition) => {
      let partitions: ReturnType<typeof cluster.findTopicPartitionMetadata>;
      try {
        partitions = cluster.findTopicPartitionMetadata(topic);
      } catch (error) {
        // A disconnect (a lost broker, a closed connection) drops kafkajs's metadata until the next
        // refresh: no known leader, which the producer retries after a refresh.
        if ((error as { name?: unknown }).name === "KafkaJSTopicMetadataNotLoaded") return undefined;
        throw error;
      }
      const leader = partitions.find((p) => p.partitionId === partition)?.leader;
      return leader === null || leader === undefined || leader < 0 ? undefined : leader;
    },
    refreshMetadata: () => cluster.refreshMetadata(),
    produce: async (nodeId, apiVersion, body) => {
      const broker = await cluster.findBroker({ nodeId });
      return broker.connectionPool.send({
        request: {
          apiKey: PRODUCE_API_KEY,
          apiVersion,
          apiName: "Produce",
          encode: async () => encoderOf(body),
        },
        response: { decode: async (payload) => ({ payload }), parse: async ({ payload }) => payload },
      });
    },
    connectionFailed: async (nodeId, error) => {
      // As kafkajs's producer: a closed connection is reopened by the next request; a cluster that
      // lost every connection reconnects.
      if ((error as { name?: unknown }).name === "KafkaJSConnectionClosedError") {
        await (await cluster.findBroker({ nodeId })).disconnect();
      }
      if (!cluster.isConnected()) await cluster.connect();
    },
    addPartitions: (topics) =>
      retrier(async (bail) => {
        try {
          await transactionManager.addPartitionsToTransaction(topics);
        } catch (error) {
          // CONCURRENT_TRANSACTIONS (the previous transaction on the id still ending) and
          // coordinator moves are retriable; anything else ends the retries.
          if ((error as { retriable?: unknown }).retriable !== true) bail(error);
          throw error;
        }
      }),
    errorFromCode: protocolErrors().createErrorFromCode,
  };
}

/** A kafkajs encoder that holds `body` as it is: kafkajs copies it into the request, once. */
function encoderOf(body: Buffer): unknown {
  const encoder = new (KafkajsEncoder())(0);
  encoder.buf = body;
  encoder.offset = body.length;
  return encoder;
}
