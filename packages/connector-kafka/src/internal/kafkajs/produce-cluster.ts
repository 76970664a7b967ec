/**
 * The bridge between the lean produce path (`idempotent-producer.ts`) and kafkajs: its cluster
 * (connections, metadata, SASL/TLS), its transaction manager (AddPartitionsToTxn) and its protocol
 * errors. Loaded from kafkajs internals like the rest of this folder (kafkajs 2.2.4, pinned).
 */

import type { ProduceCluster } from "../../producer/idempotent-producer.js";
import { PRODUCE_API_KEY, produceVersionOf, setCorrelationId } from "../../protocol/produce-request.js";
import { kafkajsModule } from "./kafkajs-loader.js";

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
    connectionPool: { getConnection(index?: number): Promise<KafkajsConnection> };
  }>;
}

/**
 * The parts of kafkajs's connection (`network/connection.js`) a request written here goes through:
 * its authentication, correlation ids and request queue (in-flight limit, timeouts, matching the
 * response) and its socket.
 */
export interface KafkajsConnection {
  readonly clientId: string | null | undefined;
  readonly socket: { write(data: Buffer): boolean };
  readonly requestQueue: {
    push(request: {
      entry: {
        apiKey: number;
        apiName: string;
        apiVersion: number;
        correlationId: number;
        resolve(answer: { payload: Buffer; size: number }): void;
        reject(error: unknown): void;
      };
      expectResponse: boolean;
      /** Extends the queue's own timeout for this request (never shortens it). */
      requestTimeout?: number;
      sendRequest(): void;
    }): void;
  };
  isAuthenticated(): boolean;
  authenticate(): Promise<void>;
  failIfNotConnected(): void;
  nextCorrelationId(): number;
  logDebug(message: string, extra: Record<string, unknown>): void;
}

/** As kafkajs names a request in its debug log. */
const produceRequestInfo = (version: number) => `Produce(key: ${PRODUCE_API_KEY}, version: ${version})`;

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
    produce: async (nodeId, encode, timeoutMs) => {
      const broker = await cluster.findBroker({ nodeId });
      // Connection 0, where kafkajs's pool sends every request but Fetch.
      return sendAsItIs(await broker.connectionPool.getConnection(0), encode, timeoutMs);
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

/**
 * What kafkajs's `connection.send` does for a request, but with the request's bytes written to the
 * socket as `encode` wrote them: kafkajs would copy them into a request of its own twice.
 */
async function sendAsItIs(
  connection: KafkajsConnection,
  encode: (clientId: string | null) => Buffer,
  timeoutMs: number,
): Promise<Buffer> {
  if (!connection.isAuthenticated()) await connection.authenticate();
  connection.failIfNotConnected();
  const request = encode(connection.clientId ?? null);
  const correlationId = connection.nextCorrelationId();
  setCorrelationId(request, correlationId);
  const version = produceVersionOf(request);
  // kafkajs's debug log lines for the request and its answer, which tools and tests count.
  connection.logDebug(`Request ${produceRequestInfo(version)}`, {
    correlationId,
    expectResponse: true,
    size: request.length,
  });
  let timer: NodeJS.Timeout | undefined;
  const answer = await new Promise<{ payload: Buffer; size: number }>((resolve, reject) => {
    // kafkajs's queue times a request out after the longer of its client's `requestTimeout` and
    // this one; a shorter `requestTimeoutMs` is kept here. A late answer then settles nothing.
    timer = setTimeout(
      () =>
        reject(
          Object.assign(new Error(`Produce request timed out after ${timeoutMs} ms (requestTimeoutMs)`), {
            name: "KafkaJSRequestTimeoutError",
            retriable: true,
          }),
        ),
      timeoutMs,
    );
    connection.requestQueue.push({
      entry: {
        apiKey: PRODUCE_API_KEY,
        apiName: "Produce",
        apiVersion: version,
        correlationId,
        resolve,
        reject,
      },
      expectResponse: true,
      requestTimeout: timeoutMs,
      sendRequest: () => connection.socket.write(request),
    });
  }).finally(() => clearTimeout(timer));
  connection.logDebug(`Response ${produceRequestInfo(version)}`, { correlationId, size: answer.size });
  return answer.payload;
}
