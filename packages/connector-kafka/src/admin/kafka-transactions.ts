import { ConfigurationError, OnceflowError } from "@onceflow/core";
import { type ClientOptions, kafkaClientOf, validateClientOptions } from "../internal/client.js";
import { KafkaConnection } from "../internal/kafkajs/internals.js";
import {
  DESCRIBE_TRANSACTIONS,
  decodeDescribeTransactions,
  decodeListTransactions,
  encodeDescribeTransactions,
  encodeListTransactions,
  LIST_TRANSACTIONS,
} from "./transactions-protocol.js";

/**
 * A transaction as the cluster's transaction coordinators report it.
 *
 * @example
 * ```ts
 * const info: KafkaTransactionInfo = { transactionalId: "orders-out-0-2", producerId: "4001",
 *   producerEpoch: 7, state: "Ongoing", startedAt: 1764400000000, timeoutMs: 900000,
 *   topics: [{ topic: "orders", partitions: [0, 3] }], coordinator: 1 };
 * ```
 */
export interface KafkaTransactionInfo {
  readonly transactionalId: string;
  readonly producerId: string;
  readonly producerEpoch: number;
  /** Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Empty, Dead, PrepareEpochFence. */
  readonly state: string;
  /** When the open transaction began (ms since the epoch); undefined when none is open. */
  readonly startedAt: number | undefined;
  /** The id's transaction timeout: the broker aborts an ongoing transaction this much after it began. */
  readonly timeoutMs: number;
  /** The partitions the ongoing transaction wrote to (its markers hold read_committed readers there). */
  readonly topics: ReadonlyArray<{ readonly topic: string; readonly partitions: readonly number[] }>;
  /** The node id of the broker coordinating the id. */
  readonly coordinator: number;
}

/**
 * What {@link listKafkaTransactions} looks for.
 *
 * @example
 * ```ts
 * const options: ListKafkaTransactionsOptions = { brokers: ["localhost:9092"], prefix: "orders-out", olderThanMs: 60_000 };
 * ```
 */
export interface ListKafkaTransactionsOptions extends ClientOptions {
  /** Only transactional ids that start with this — a KafkaSink's `transactionalIdPrefix`. */
  readonly prefix?: string;
  /** Only transactions in these states (default: every state). `["Ongoing"]` finds open ones. */
  readonly states?: readonly string[];
  /** Only ongoing transactions that began more than this many ms ago (implies `states: ["Ongoing"]`). */
  readonly olderThanMs?: number;
}

/**
 * Lists the transactions of the cluster (Kafka 3.0+: ListTransactions on every broker, then
 * DescribeTransactions at each coordinator), sorted by transactional id. With `olderThanMs` it finds
 * *lingering* transactions: open ones that a crashed writer, or a job whose
 * `transactionalIdPrefix` changed, left behind — they hold `read_committed` consumers at the last
 * stable offset until the broker's transaction timeout. {@link abortKafkaTransactions} aborts them.
 *
 * @example
 * ```ts
 * const lingering = await listKafkaTransactions({ brokers: ["localhost:9092"], prefix: "orders-out", olderThanMs: 60_000 });
 * for (const t of lingering) console.log(t.transactionalId, new Date(t.startedAt ?? 0), t.topics);
 * ```
 */
export async function listKafkaTransactions(
  options: ListKafkaTransactionsOptions,
): Promise<KafkaTransactionInfo[]> {
  validateClientOptions(options);
  const olderThanMs = options.olderThanMs;
  if (olderThanMs !== undefined && !(Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
    throw new ConfigurationError("olderThanMs", `must be a number of ms ≥ 0, got ${olderThanMs}`);
  }
  const states = olderThanMs === undefined ? (options.states ?? []) : ["Ongoing"];
  const connection = new KafkaConnection(kafkaClientOf(options));
  await connection.connect();
  try {
    const found = await listTransactionsOver(connection, { prefix: options.prefix ?? "", states });
    const now = Date.now();
    return found.filter(
      (transaction) =>
        olderThanMs === undefined ||
        (transaction.state === "Ongoing" &&
          transaction.startedAt !== undefined &&
          now - transaction.startedAt > olderThanMs),
    );
  } finally {
    await connection.disconnect();
  }
}

/**
 * ListTransactions on every broker, then DescribeTransactions at each coordinator, over a
 * connection the caller owns; sorted by transactional id. Throws `SERVICE_UNAVAILABLE` when a
 * broker refuses (Kafka before 3.0 does not know ListTransactions) or answers an error.
 *
 * @example
 * ```ts
 * const open = await listTransactionsOver(connection, { prefix: "orders-out-", states: ["Ongoing"] });
 * ```
 */
export async function listTransactionsOver(
  connection: KafkaConnection,
  options: { readonly prefix: string; readonly states: readonly string[] },
): Promise<KafkaTransactionInfo[]> {
  const found: KafkaTransactionInfo[] = [];
  for (const nodeId of await connection.brokerNodeIds()) {
    // Each broker lists the ids it coordinates, so it is also the one to describe them.
    const listed = decodeListTransactions(
      await request(connection, nodeId, LIST_TRANSACTIONS, encodeListTransactions(options.states)),
    );
    if (listed.errorCode !== 0) throw brokerError("ListTransactions", nodeId, listed.errorCode);
    const ids = listed.transactions
      .map((transaction) => transaction.transactionalId)
      .filter((id) => id.startsWith(options.prefix));
    if (ids.length === 0) continue;
    const described = decodeDescribeTransactions(
      await request(connection, nodeId, DESCRIBE_TRANSACTIONS, encodeDescribeTransactions(ids)),
    );
    for (const transaction of described) {
      // Gone or moved since it was listed: nothing to report.
      if (transaction.errorCode !== 0) continue;
      found.push({
        transactionalId: transaction.transactionalId,
        producerId: transaction.producerId,
        producerEpoch: transaction.producerEpoch,
        state: transaction.state,
        // The broker keeps the last start time after the end: report it only while open.
        startedAt:
          OPEN_STATES.has(transaction.state) && transaction.startTimeMs >= 0
            ? transaction.startTimeMs
            : undefined,
        timeoutMs: transaction.timeoutMs,
        topics: transaction.topics,
        coordinator: Number(nodeId),
      });
    }
  }
  return found.sort((a, b) => a.transactionalId.localeCompare(b.transactionalId));
}

/**
 * Aborts whatever transaction is open on each transactional id, by fencing it (InitProducerId, as
 * a new writer would): the broker aborts the open transaction and bumps the epoch, so
 * `read_committed` consumers move past it and its old writer can neither write nor commit any
 * more. Safe on ids with no open transaction. Do not point it at a running job's ids: that job
 * fails with `TRANSACTION_FENCED` and restarts from its checkpoint.
 *
 * @example
 * ```ts
 * const lingering = await listKafkaTransactions({ brokers, prefix: "old-prefix", olderThanMs: 60_000 });
 * await abortKafkaTransactions({ brokers, transactionalIds: lingering.map((t) => t.transactionalId) });
 * ```
 */
export async function abortKafkaTransactions(
  options: ClientOptions & {
    readonly transactionalIds: readonly string[];
    readonly transactionTimeout?: number;
  },
): Promise<void> {
  validateClientOptions(options);
  const connection = new KafkaConnection(kafkaClientOf(options));
  await connection.connect();
  try {
    for (const transactionalId of options.transactionalIds) {
      await connection.fence(transactionalId, options.transactionTimeout ?? 60_000);
    }
  } finally {
    await connection.disconnect();
  }
}

/** States in which a transaction is still open at the coordinator. */
const OPEN_STATES = new Set(["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"]);

async function request(
  connection: KafkaConnection,
  nodeId: number,
  api: { readonly apiKey: number; readonly apiVersion: number; readonly apiName: string },
  body: Buffer,
): Promise<Buffer> {
  try {
    return await connection.sendRaw({ nodeId }, { ...api, body });
  } catch (error) {
    throw new OnceflowError(
      "SERVICE_UNAVAILABLE",
      `${api.apiName} v${api.apiVersion} to broker ${nodeId} failed: ${error instanceof Error ? error.message : String(error)}. Listing transactions needs Kafka 3.0 or newer (KIP-664).`,
      { cause: error, details: { nodeId, api: api.apiName } },
    );
  }
}

function brokerError(apiName: string, nodeId: number, errorCode: number): OnceflowError {
  return new OnceflowError(
    "SERVICE_UNAVAILABLE",
    `${apiName} to broker ${nodeId} answered error code ${errorCode} (a coordinator loading or moving answers 14 or 16: try again)`,
    { details: { nodeId, errorCode } },
  );
}
