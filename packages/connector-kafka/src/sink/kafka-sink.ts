import {
  type CommitErrorClassification,
  ConfigurationError,
  type FunctionSnapshotContext,
  jsonSerializer,
  type RuntimeContext,
  type SinkContext,
  TwoPhaseCommitSink,
} from "@onceflow/core";
import type { ICustomPartitioner, Kafka } from "kafkajs";
import { recordRejection } from "../errors/kafka-record-rejected-error.js";
import { lazyKafkaClientOf, requirePositiveInteger, validateClientOptions } from "../internal/client.js";
import {
  clientRetryOf,
  type IdempotentProducerHandle,
  KafkaConnection,
  kafkaErrorType,
  type OpenTransaction,
} from "../internal/kafkajs/internals.js";
import { kafkajs } from "../internal/kafkajs/kafkajs-loader.js";
import type { ProducerMessage } from "../producer/producer-message.js";
import { COMPRESSION_TYPES, CodecUnavailableError, loadCodec } from "../protocol/compression/codecs.js";
import type { CompressionType } from "../protocol/compression/compression-codec.js";
import {
  type FencedTransactionContext,
  fencedRecoveryError,
  fencedWriteError,
} from "./fenced-transaction-errors.js";
import type { DeliveryGuarantee, KafkaSinkHeaders, KafkaSinkOptions } from "./kafka-sink-options.js";
import type { KafkaTransaction } from "./kafka-transaction.js";
import { findLingeringTransactionalIds, newestIncarnationOf } from "./lingering-transactions.js";
import { checkPrefixClaims, claimPrefix, prefixClaimId, releasePrefixClaim } from "./prefix-claims.js";
import { type ProducerStartSettings, producerStartSettings } from "./producer-settings.js";
import { defaultValueSerializer, type Serializer } from "./serializer.js";
import { checkTransactionTimeout } from "./transaction-timeout-check.js";
import { TransactionalIdPool } from "./transactional-id-pool.js";

const DEFAULT_TRANSACTION_TIMEOUT = 900_000;
const DEFAULT_POOL_SIZE = 5;
/** Kafka Streams' default for its producers; under exactly-once nothing is visible before the commit anyway. */
const DEFAULT_LINGER_MS = 100;
/** The Java producer's default since Kafka 4.0 (KIP-1030): outside transactions records are visible once acknowledged. */
const DEFAULT_LINGER_MS_OUTSIDE_TRANSACTIONS = 5;
const FENCE_CONCURRENCY = 8;
const RETRIABLE_COMMIT_ERRORS = new Set([
  "CONCURRENT_TRANSACTIONS",
  "COORDINATOR_LOAD_IN_PROGRESS",
  "COORDINATOR_NOT_AVAILABLE",
  "NOT_COORDINATOR",
  "NOT_COORDINATOR_FOR_GROUP",
  "GROUP_COORDINATOR_NOT_AVAILABLE",
  "GROUP_LOAD_IN_PROGRESS",
  "REQUEST_TIMED_OUT",
  "NETWORK_EXCEPTION",
]);

/**
 * A Kafka sink with Flink's delivery guarantees, built on {@link TwoPhaseCommitSink}.
 *
 * Exactly-once: one Kafka transaction per checkpoint and subtask, on a small pool of
 * transactional ids per attempt (`prefix-subtask-incarnation-slot`, the incarnation being the
 * attempt's `RuntimeContext.incarnation`). The checkpoint barrier flushes it and stores its
 * transactional id, producer id and epoch; the commit (EndTxn) follows when the checkpoint
 * completes, retried with backoff. After a crash the new attempt first commits the restored
 * checkpoint's transactions with their stored ids and epochs — also those the killed process had
 * pre-committed but not committed — then finds the ids that older attempts of its subtasks left a
 * transaction open on (ListTransactions by prefix) and fences them, which aborts what was left
 * open. No attempt ever touches a newer attempt's ids, so a frozen old process (a zombie) that
 * comes back cannot fence, abort or commit the transactions of the process that replaced it; the
 * checkpoint storage stops it at its next checkpoint.
 *
 * At-least-once and none: one idempotent producer per attempt; writes return once batched, and
 * at-least-once's checkpoint barrier waits until every record written before it is acknowledged
 * (none's only at the job's last checkpoint).
 *
 * @example
 * ```ts
 * const sink = new KafkaSink<Order>({
 *   brokers: ["localhost:9092"],
 *   topic: "orders-enriched",
 *   key: { serialize: (order) => order.id },
 *   value: Serializers.json(),
 *   deliveryGuarantee: "exactly-once",
 *   transactionalIdPrefix: "orders-job-enriched",
 * });
 * stream.sinkTo(sink, { uid: "enriched-out" });
 * ```
 */
export class KafkaSink<IN> extends TwoPhaseCommitSink<IN, KafkaTransaction> {
  /** The client, made when the sink first talks to Kafka (its recovery), not when built. */
  private readonly kafka: () => Kafka;
  private readonly guarantee: DeliveryGuarantee;
  private readonly prefix: string;
  private readonly poolSize: number;
  private readonly lingerMs: number;
  private readonly compression: CompressionType;
  private readonly producerSettings: ProducerStartSettings;
  private readonly timeoutMs: number;
  private readonly checkpointIntervalHint: number | undefined;
  private readonly topicOf: (value: IN) => string;
  private readonly keySerializer: Serializer<IN> | undefined;
  private readonly valueSerializer: Serializer<IN>;
  private readonly headersOf: ((value: IN) => KafkaSinkHeaders) | undefined;
  private readonly timestampOf: ((value: IN) => number) | undefined;
  private readonly partitioner: ICustomPartitioner;

  private connection: KafkaConnection | undefined;
  private connecting: Promise<KafkaConnection> | undefined;
  /** At-least-once and none: one idempotent producer per attempt, made at the first record. */
  private producer: Promise<IdempotentProducerHandle> | undefined;
  private pool: TransactionalIdPool | undefined;
  private readonly openTransactions = new WeakMap<KafkaTransaction, Promise<OpenTransaction>>();
  /** What the recovery of the current attempt learnt; a new attempt (a new context) starts afresh. */
  private attempt: AttemptRecovery | undefined;
  private registeredPrefix: string | undefined;

  constructor(options: KafkaSinkOptions<IN>) {
    const guarantee = options.deliveryGuarantee ?? "at-least-once";
    const timeout = options.transactionTimeout ?? DEFAULT_TRANSACTION_TIMEOUT;
    super({
      name: options.name ?? "KafkaSink",
      transactionSerializer: jsonSerializer<KafkaTransaction>(),
      ...(guarantee === "exactly-once" ? { transactionTimeout: timeout } : {}),
      ignoreFailuresAfterTransactionTimeout: options.ignoreFailuresAfterTransactionTimeout ?? false,
      commitRetry: {
        maxAttempts: 10,
        initialDelay: 200,
        maxDelay: 10_000,
        multiplier: 2,
        ...options.commitRetry,
      },
    });
    validateClientOptions(options);
    if (!["none", "at-least-once", "exactly-once"].includes(guarantee)) {
      throw new ConfigurationError(
        "deliveryGuarantee",
        `must be "none", "at-least-once" or "exactly-once", got ${JSON.stringify(guarantee)}`,
      );
    }
    if (typeof options.topic !== "string" && typeof options.topic !== "function") {
      throw new ConfigurationError(
        "topic",
        "give a topic name, or a function that picks the topic of each record",
      );
    }
    if (options.topic === "") throw new ConfigurationError("topic", "must not be empty");
    if (guarantee === "exactly-once") {
      const prefix = options.transactionalIdPrefix;
      if (prefix === undefined || prefix.trim() === "") {
        throw new ConfigurationError(
          "transactionalIdPrefix",
          'exactly-once needs a transactionalIdPrefix that is unique to this sink and stable across restarts, for example "orders-job-enriched-out"',
        );
      }
    }
    requirePositiveInteger("transactionalIdPoolSize", options.transactionalIdPoolSize);
    if ((options.transactionalIdPoolSize ?? DEFAULT_POOL_SIZE) < 3) {
      throw new ConfigurationError(
        "transactionalIdPoolSize",
        `must be at least 3 (one committed transaction a restore may still need, one pending, one open), got ${options.transactionalIdPoolSize}`,
      );
    }
    requirePositiveInteger("transactionTimeout", options.transactionTimeout);
    if (options.lingerMs !== undefined && !(Number.isInteger(options.lingerMs) && options.lingerMs >= 0)) {
      throw new ConfigurationError(
        "lingerMs",
        `must be an integer number of milliseconds ≥ 0, got ${options.lingerMs}`,
      );
    }
    this.compression = validCompression(options.compression);
    this.kafka = lazyKafkaClientOf(options);
    this.guarantee = guarantee;
    this.prefix = options.transactionalIdPrefix ?? "";
    this.poolSize = options.transactionalIdPoolSize ?? DEFAULT_POOL_SIZE;
    this.lingerMs =
      options.lingerMs ??
      (guarantee === "exactly-once" ? DEFAULT_LINGER_MS : DEFAULT_LINGER_MS_OUTSIDE_TRANSACTIONS);
    this.producerSettings = producerStartSettings(
      options,
      this.lingerMs,
      options.kafka === undefined ? undefined : clientRetryOf(options.kafka),
    );
    this.timeoutMs = timeout;
    this.checkpointIntervalHint = options.checkpointInterval;
    const topic = options.topic;
    this.topicOf = typeof topic === "string" ? () => topic : topic;
    this.keySerializer = options.key;
    this.valueSerializer = options.value ?? defaultValueSerializer<IN>();
    this.headersOf = options.headers;
    this.timestampOf = options.timestamp;
    this.partitioner = partitionerOf(options.partitioner);
  }

  // ---- the transaction operations --------------------------------------------------------------

  protected beginTransaction(): KafkaTransaction {
    // Nothing happens at the broker until the first record: idle checkpoints cost no request.
    return {
      guarantee: this.guarantee,
      checkpointId: 0,
      records: 0,
      poolSize: this.poolSize,
    };
  }

  protected invoke(transaction: KafkaTransaction, value: IN, _context: SinkContext): Promise<void> {
    return this.invokeBatch(transaction, [value]);
  }

  protected override async invokeBatch(transaction: KafkaTransaction, values: readonly IN[]): Promise<void> {
    if (values.length === 0) return;
    const topicMessages = this.toTopicMessages(values);
    // Returns once the records are batched (waiting only while too much is unacknowledged); a
    // failure (already mapped) shows in a later write or at the latest in preCommit.
    const producer =
      this.guarantee === "exactly-once"
        ? await this.openTransaction(transaction)
        : await this.idempotentProducer();
    await producer.send(topicMessages);
    transaction.records += values.length;
  }

  protected async preCommit(
    transaction: KafkaTransaction,
    checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    // Sends are acknowledged here, before the checkpoint can acknowledge the transaction: every
    // record is in the broker's log (or the send failed, and so does this). Without a guarantee
    // only the last checkpoint waits (Flink's NONE flushes at the end of input only).
    await (await this.openTransactions.get(transaction))?.flush();
    const producer = await this.producer;
    if (this.guarantee === "at-least-once" || checkpoint.isFinal === true) await producer?.flush();
    else producer?.throwIfFailed();
    transaction.checkpointId = checkpoint.checkpointId;
  }

  protected async commit(transaction: KafkaTransaction): Promise<void> {
    const pool = this.pool;
    pool?.checkpointCompleted(transaction.checkpointId);
    if (transaction.transactionalId === undefined) return;
    const slot = pool?.slotOf(transaction.transactionalId);
    try {
      await (await this.connect()).endTransaction(handleOf(transaction), true);
    } catch (error) {
      // Lost to its timeout: the broker aborted it, so nothing can need the id's epoch any more. The
      // slot must come back, or a sink that ignores such losses runs out of ids after a few.
      if (slot !== undefined && this.classifyCommitError(error, transaction) === "timed-out") {
        pool?.release(slot);
      }
      throw error;
    }
    this.openTransactions.delete(transaction);
    if (slot !== undefined) pool?.committed(slot, this.lastCheckpointId);
  }

  protected async abort(transaction: KafkaTransaction): Promise<void> {
    if (transaction.transactionalId === undefined) return;
    const open = this.openTransactions.get(transaction);
    this.openTransactions.delete(transaction);
    // No Produce of this transaction may reach a broker after its EndTxn: wait for those in flight.
    await (await open?.catch(() => undefined))?.close();
    const slot = this.pool?.slotOf(transaction.transactionalId);
    try {
      await (await this.connect()).endTransaction(handleOf(transaction), false);
    } finally {
      if (slot !== undefined) this.pool?.release(slot);
    }
  }

  protected override async recoverAndCommit(transaction: KafkaTransaction): Promise<void> {
    const attempt = this.noteRestored(transaction);
    if (transaction.transactionalId === undefined) return;
    attempt.recovered.add(transaction.transactionalId);
    try {
      await (await this.connect()).endTransaction(handleOf(transaction), true);
    } catch (error) {
      throw fencedRecoveryError(error, transaction, this.fencedContext(transaction), {
        prefix: this.prefix,
        incarnation: this.runtimeContext.incarnation,
        restoredCheckpointId: this.lastCheckpointId,
      });
    }
  }

  protected override recoverAndAbort(transaction: KafkaTransaction): void {
    // Open transactions are stored before their first record, so they are empty; whatever the old
    // process began after that is aborted by fencing its id in finishRecoveringTransactions.
    this.noteRestored(transaction);
  }

  /**
   * Checks the transaction timeout against the broker, then aborts what earlier attempts left open:
   * it lists the prefix's transactions (ListTransactions) and fences the ids of this and older
   * incarnations of every subtask this one recovered (also of a larger earlier pool or
   * parallelism), except those just recovered — so read_committed consumers are not held at the
   * last stable offset. Ids of newer incarnations are never touched: they belong to the process
   * that replaced this one.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    if (this.guarantee !== "exactly-once") return;
    const context = this.runtimeContext;
    const attempt = this.currentAttempt();
    try {
      const pool = new TransactionalIdPool(
        this.prefix,
        context.subtaskIndex,
        context.incarnation,
        this.poolSize,
      );
      this.pool = pool;
      for (const id of attempt.recovered) {
        // Only when an incarnation is reused (checkpointing off, or a test harness): a second
        // restore of the checkpoint must still find the epoch of what was committed just now.
        const slot = pool.slotOf(id);
        if (slot !== undefined) pool.committed(slot, this.lastCheckpointId);
      }
      // The timeout check (DescribeConfigs, on an admin client of its own) and the search for
      // lingering transactions are independent round trips: side by side. Nothing is fenced before
      // both are done, and a misconfigured timeout is the error reported when both fail.
      const [checked, searched] = await Promise.allSettled([
        checkTransactionTimeout(this.kafka(), {
          transactionTimeout: this.timeoutMs,
          // The job's interval; the `checkpointInterval` option serves when the sink runs outside a job.
          checkpointInterval: context.checkpointingInterval ?? this.checkpointIntervalHint,
          logger: this.logger,
        }),
        this.connect().then(async (connection) => ({
          connection,
          ...(await findLingeringTransactionalIds(
            connection,
            {
              prefix: this.prefix,
              subtaskIndex: context.subtaskIndex,
              parallelism: context.parallelism,
              incarnation: context.incarnation,
              recoveredSubtasks: this.recoveredSubtaskIndexes(),
              recovered: attempt.recovered,
              knownIncarnations: attempt.restoredIncarnations,
              poolSize: Math.max(attempt.restoredPoolSize, this.poolSize),
              ...newestIncarnationOf(context),
            },
            this.logger,
          )),
        })),
      ]);
      if (checked.status === "rejected") throw checked.reason;
      if (searched.status === "rejected") throw searched.reason;
      const { connection, ids, listed, claimedBy } = searched.value;
      // Another job's sink on this prefix: refused before anything of it is fenced.
      checkPrefixClaims(this.prefix, context.jobId, claimedBy);
      // Subtask 0 (re)writes the job's claim of the prefix, which other jobs' starts see.
      const claim = context.subtaskIndex === 0 ? [prefixClaimId(this.prefix, context.jobId)] : [];
      await forEachLimited([...ids, ...claim], FENCE_CONCURRENCY, (id) =>
        connection.fence(id, this.timeoutMs),
      );
      this.logger.info(
        {
          fenced: ids.length,
          fencedIds: ids.slice(0, 20),
          foundBy: listed ? "ListTransactions" : "restored ids",
          recovered: attempt.recovered.size,
          restoredCheckpointId: this.lastCheckpointId,
          incarnation: context.incarnation,
        },
        "kafka sink: recovered pending transactions and aborted what earlier attempts left open",
      );
    } catch (error) {
      // The attempt ends here (closeResources follows): its claim on the prefix must not outlive it.
      this.releasePrefix();
      throw error;
    }
  }

  protected override describeTransaction(transaction: KafkaTransaction): string {
    if (transaction.transactionalId === undefined)
      return `${transaction.guarantee}(${transaction.records} records)`;
    return `${transaction.transactionalId} (producerId ${transaction.producerId}, epoch ${transaction.producerEpoch})`;
  }

  /**
   * Kafka's answers to EndTxn: coordinator moves and load are retried; a stale epoch means the
   * broker aborted the transaction after its timeout (when it is that old) or a newer writer
   * fenced it; an aborted or unknown transaction that is not that old is fatal.
   */
  protected override classifyCommitError(
    error: unknown,
    transaction: KafkaTransaction,
  ): CommitErrorClassification {
    const type = kafkaErrorType(error);
    const age = transaction.startedAt === undefined ? 0 : Date.now() - transaction.startedAt;
    const expired = age >= this.timeoutMs;
    switch (type) {
      case "INVALID_PRODUCER_EPOCH":
      case "PRODUCER_FENCED":
        return expired ? "timed-out" : "fenced";
      case "INVALID_TXN_STATE":
      case "INVALID_PRODUCER_ID_MAPPING":
        return expired ? "timed-out" : "fatal";
      case undefined:
        return "retry";
      default:
        if (RETRIABLE_COMMIT_ERRORS.has(type)) return "retry";
        return (error as { retriable?: unknown }).retriable === true ? "retry" : "fatal";
    }
  }

  /**
   * Starts the attempt: an exactly-once sink claims its prefix for this subtask in this process
   * (a newer attempt of the same job takes a claim over). The connection opens on first use.
   */
  protected override openResources(): void {
    this.currentAttempt();
  }

  /**
   * Ends the attempt after `close()` aborted the open transaction (or after a failed start): drops
   * the prefix claim, stops the producer outside transactions (waiting for its requests in flight;
   * what it did not send, a restore sends again under at-least-once) and disconnects.
   */
  protected override async closeResources(): Promise<void> {
    this.releasePrefix();
    const producer = this.producer;
    this.producer = undefined;
    await producer?.then((p) => p.close()).catch(() => undefined);
    await this.connection?.disconnect().catch(() => undefined);
    this.connection = undefined;
    this.connecting = undefined;
  }

  // ---- internals --------------------------------------------------------------------------------

  /**
   * The recovery facts of the current attempt. A new attempt on a reused instance comes with a new
   * context, and starts afresh: what an earlier attempt recovered says nothing about this one. The
   * first call of an exactly-once attempt claims the prefix for its subtask in this process.
   */
  private currentAttempt(): AttemptRecovery {
    const context = this.runtimeContext;
    if (this.attempt?.context === context) return this.attempt;
    this.attempt = { context, recovered: new Set(), restoredPoolSize: 0, restoredIncarnations: new Set() };
    if (this.guarantee === "exactly-once") {
      this.releasePrefix();
      const { key, tookOverFrom } = claimPrefix(this, this.name, this.prefix, context);
      this.registeredPrefix = key;
      if (tookOverFrom !== undefined) {
        this.logger.info(
          { transactionalIdPrefix: this.prefix, previousHolder: tookOverFrom },
          "kafka sink: took the prefix over from an earlier attempt of this job that ended without closing",
        );
      }
    }
    return this.attempt;
  }

  /** Ends this sink's claim on its prefix (at close, or when its attempt fails to start). */
  private releasePrefix(): void {
    releasePrefixClaim(this, this.registeredPrefix);
    this.registeredPrefix = undefined;
  }

  private noteRestored(transaction: KafkaTransaction): AttemptRecovery {
    const attempt = this.currentAttempt();
    attempt.restoredPoolSize = Math.max(attempt.restoredPoolSize, transaction.poolSize ?? 0);
    if (transaction.transactionalId !== undefined) {
      const parts = TransactionalIdPool.parse(this.prefix, transaction.transactionalId);
      if (parts !== undefined) attempt.restoredIncarnations.add(parts.incarnation);
    }
    return attempt;
  }

  private connect(): Promise<KafkaConnection> {
    this.connecting ??= (async () => {
      const connection = new KafkaConnection(this.kafka());
      await connection.connect();
      this.connection = connection;
      return connection;
    })();
    this.connecting.catch(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** Begins the broker transaction of `transaction` on a free id of the pool, at its first record. */
  private openTransaction(transaction: KafkaTransaction): Promise<OpenTransaction> {
    let open = this.openTransactions.get(transaction);
    if (open !== undefined) return open;
    const pool = this.pool;
    if (pool === undefined) throw new Error("KafkaSink: finishRecoveringTransactions did not run");
    open = (async () => {
      const slot = pool.acquire();
      try {
        const connection = await this.connect();
        const started = await connection.beginTransaction({
          transactionalId: pool.idOf(slot),
          transactionTimeout: this.timeoutMs,
          partitioner: this.partitioner,
          lingerMs: this.lingerMs,
          compression: this.compression,
          settings: this.producerSettings,
          mapFailure: (error, records) =>
            recordRejection(error, this.name, records) ??
            fencedWriteError(error, transaction, this.fencedContext(transaction), this.lastCheckpointId + 1),
        });
        transaction.transactionalId = started.transactionalId;
        transaction.producerId = started.producerId;
        transaction.producerEpoch = started.producerEpoch;
        transaction.startedAt = Date.now();
        return started;
      } catch (error) {
        pool.release(slot);
        this.openTransactions.delete(transaction);
        throw error;
      }
    })();
    this.openTransactions.set(transaction, open);
    return open;
  }

  /** What the fenced-transaction errors say about this sink and `transaction`. */
  private fencedContext(transaction: KafkaTransaction): FencedTransactionContext {
    return {
      sinkName: this.name,
      timeoutMs: this.timeoutMs,
      described: this.describeTransaction(transaction),
    };
  }

  /**
   * At-least-once and none: the attempt's idempotent producer (InitProducerId without a
   * transactional id), on the same produce path as a transaction's. A producer that failed stays
   * failed: its sequence numbers are no longer the broker's, and the attempt restarts.
   */
  private idempotentProducer(): Promise<IdempotentProducerHandle> {
    if (this.producer === undefined) {
      const started = this.connect().then((connection) =>
        connection.startIdempotentProducer({
          partitioner: this.partitioner,
          lingerMs: this.lingerMs,
          compression: this.compression,
          settings: this.producerSettings,
          mapFailure: (error, records) => recordRejection(error, this.name, records) ?? error,
        }),
      );
      this.producer = started;
      // A failed start is tried again at the next record.
      started.catch(() => {
        if (this.producer === started) this.producer = undefined;
      });
    }
    return this.producer;
  }

  private toTopicMessages(values: readonly IN[]): Array<{ topic: string; messages: ProducerMessage[] }> {
    const byTopic = new Map<string, ProducerMessage[]>();
    for (const value of values) {
      const topic = this.topicOf(value);
      const message: { -readonly [P in keyof ProducerMessage]: ProducerMessage[P] } = {
        key: this.keySerializer?.serialize(value) ?? null,
        value: this.valueSerializer.serialize(value),
      };
      if (this.headersOf !== undefined) message.headers = this.headersOf(value);
      if (this.timestampOf !== undefined) message.timestamp = String(this.timestampOf(value));
      let list = byTopic.get(topic);
      if (list === undefined) {
        list = [];
        byTopic.set(topic, list);
      }
      list.push(message);
    }
    return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
  }
}

/** What the recovery of one attempt learnt from the restored checkpoint. */
interface AttemptRecovery {
  readonly context: RuntimeContext;
  /** Ids committed from the restored checkpoint: never fenced, so a second restore finds their epoch. */
  readonly recovered: Set<string>;
  restoredPoolSize: number;
  /** Incarnations named by restored ids (`undefined`: ids without incarnation). */
  readonly restoredIncarnations: Set<number | undefined>;
}

function handleOf(transaction: KafkaTransaction): {
  transactionalId: string;
  producerId: string;
  producerEpoch: number;
} {
  return {
    transactionalId: transaction.transactionalId as string,
    producerId: transaction.producerId as string,
    producerEpoch: transaction.producerEpoch as number,
  };
}

function partitionerOf(custom: KafkaSinkOptions<unknown>["partitioner"]): ICustomPartitioner {
  // kafkajs's own, looked up when a producer is made: building a sink does not load kafkajs.
  if (custom === undefined) return () => kafkajs().Partitioners.DefaultPartitioner();
  return () =>
    ({ topic, partitionMetadata, message }) =>
      custom({
        topic,
        partitionCount: partitionMetadata.length,
        key: message.key === null || message.key === undefined ? null : Buffer.from(message.key),
        value: message.value === null ? null : Buffer.from(message.value),
      });
}

async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  });
  await Promise.all(workers);
}

/** The `compression` option, checked, its codec loaded: a missing package fails the sink at start. */
function validCompression(compression: CompressionType | undefined): CompressionType {
  if (compression === undefined) return "none";
  if (!COMPRESSION_TYPES.includes(compression)) {
    throw new ConfigurationError(
      "compression",
      `must be one of ${COMPRESSION_TYPES.map((type) => JSON.stringify(type)).join(", ")}, got ${JSON.stringify(compression)}`,
    );
  }
  try {
    loadCodec(compression);
  } catch (error) {
    if (!(error instanceof CodecUnavailableError)) throw error;
    throw new ConfigurationError(
      "compression",
      `${error.message}: reinstall the dependencies of @onceflow/connector-kafka on the platform the job runs on (without --omit=optional), or choose another compression`,
    );
  }
  return compression;
}
