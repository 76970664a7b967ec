import {
  type CommitErrorClassification,
  ConfigurationError,
  type FunctionSnapshotContext,
  jsonSerializer,
  type RuntimeContext,
  type SinkContext,
  TransactionError,
  TwoPhaseCommitSink,
} from "@onceflow/core";
import { type ICustomPartitioner, type Kafka, type Message, Partitioners, type Producer } from "kafkajs";
import { kafkaClientOf, requirePositiveInteger, validateClientOptions } from "../internal/client.js";
import { KafkaConnection, kafkaErrorType, type OpenTransaction } from "../internal/kafkajs/internals.js";
import type { DeliveryGuarantee, KafkaSinkOptions } from "./kafka-sink-options.js";
import { defaultValueSerializer, type Serializer } from "./serializer.js";
import { TransactionalIdPool } from "./transactional-id-pool.js";

/**
 * The handle of one checkpoint's output, as stored in the checkpoint. For exactly-once it carries
 * what another process needs to commit it: transactional id, producer id and epoch. A transaction
 * that received no record has no transactional id (`empty`): nothing was begun at the broker.
 *
 * @example
 * ```ts
 * const pending: KafkaTransaction = { guarantee: "exactly-once", checkpointId: 7, records: 120,
 *   transactionalId: "orders-out-0-2", producerId: "4001", producerEpoch: 12, startedAt: Date.now(),
 *   poolSize: 5 };
 * ```
 */
export interface KafkaTransaction {
  readonly guarantee: DeliveryGuarantee;
  /** The checkpoint that pre-committed it (0 while open). */
  checkpointId: number;
  /** Records written into it. */
  records: number;
  transactionalId?: string;
  producerId?: string;
  producerEpoch?: number;
  /** When the broker's transaction began (its first record), ms since the epoch. */
  startedAt?: number;
  /** The pool size when it was written, to find every id to fence after the pool shrank. */
  poolSize: number;
}

const DEFAULT_TRANSACTION_TIMEOUT = 900_000;
const DEFAULT_POOL_SIZE = 5;
const FENCE_CONCURRENCY = 8;
const NONE_MAX_IN_FLIGHT = 8;
/** `prefix/subtask` of every exactly-once KafkaSink running in this process, and the sink using it. */
const activePrefixes = new Map<string, { readonly name: string }>();
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
 * transactional ids (`prefix-subtask-slot`). The checkpoint barrier flushes it and stores its
 * transactional id, producer id and epoch; the commit (EndTxn) follows when the checkpoint
 * completes, retried with backoff. After a crash the new process first commits the restored
 * checkpoint's transactions with their stored ids and epochs — also those the killed process had
 * pre-committed but not committed — then fences every other id of the pool, which aborts whatever
 * was left open and shuts out a frozen old process (a zombie).
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
  private readonly kafka: Kafka;
  private readonly guarantee: DeliveryGuarantee;
  private readonly prefix: string;
  private readonly poolSize: number;
  private readonly timeoutMs: number;
  private readonly checkpointIntervalHint: number | undefined;
  private readonly topicOf: (value: IN) => string;
  private readonly keySerializer: Serializer<IN> | undefined;
  private readonly valueSerializer: Serializer<IN>;
  private readonly headersOf: ((value: IN) => Record<string, string | Buffer>) | undefined;
  private readonly timestampOf: ((value: IN) => number) | undefined;
  private readonly partitioner: ICustomPartitioner;

  private connection: KafkaConnection | undefined;
  private connecting: Promise<KafkaConnection> | undefined;
  private producer: Promise<Producer> | undefined;
  private pool: TransactionalIdPool | undefined;
  private readonly openTransactions = new WeakMap<KafkaTransaction, Promise<OpenTransaction>>();
  private readonly recovered = new Set<string>();
  private restoredPoolSize = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private sendFailure: unknown;
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
    this.kafka = kafkaClientOf(options);
    this.guarantee = guarantee;
    this.prefix = options.transactionalIdPrefix ?? "";
    this.poolSize = options.transactionalIdPoolSize ?? DEFAULT_POOL_SIZE;
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
    if (this.sendFailure !== undefined) throw this.sendFailure;
    const topicMessages = this.toTopicMessages(values);
    if (this.guarantee === "exactly-once") {
      const open = await this.openTransaction(transaction);
      try {
        await open.send(topicMessages);
      } catch (error) {
        throw this.asFencedError(error, transaction);
      }
    } else if (this.guarantee === "at-least-once") {
      await (await this.plainProducer()).sendBatch({ topicMessages, acks: -1 });
    } else {
      // No guarantee: do not wait for acknowledgements, only bound what is in flight.
      const producer = await this.plainProducer();
      if (this.inFlight.size >= NONE_MAX_IN_FLIGHT) await Promise.race(this.inFlight);
      const send: Promise<void> = producer
        .sendBatch({ topicMessages, acks: -1 })
        .then(() => undefined)
        .catch((error: unknown) => {
          this.sendFailure ??= error;
        })
        .finally(() => this.inFlight.delete(send));
      this.inFlight.add(send);
    }
    transaction.records += values.length;
  }

  protected preCommit(transaction: KafkaTransaction, checkpoint: FunctionSnapshotContext): void {
    // Sends are awaited in invokeBatch, so the transaction is flushed already.
    transaction.checkpointId = checkpoint.checkpointId;
    if (this.sendFailure !== undefined) throw this.sendFailure;
  }

  protected async commit(transaction: KafkaTransaction): Promise<void> {
    this.pool?.checkpointCompleted(transaction.checkpointId);
    if (transaction.transactionalId === undefined) return;
    await (await this.connect()).endTransaction(handleOf(transaction), true);
    this.openTransactions.delete(transaction);
    if (this.pool !== undefined && transaction.transactionalId.startsWith(this.poolPrefix())) {
      this.pool.committed(slotOf(transaction.transactionalId), this.lastCheckpointId);
    }
  }

  protected async abort(transaction: KafkaTransaction): Promise<void> {
    if (transaction.transactionalId === undefined) return;
    const open = this.openTransactions.get(transaction);
    this.openTransactions.delete(transaction);
    await open?.catch(() => undefined);
    try {
      await (await this.connect()).endTransaction(handleOf(transaction), false);
    } finally {
      if (transaction.transactionalId.startsWith(this.poolPrefix())) {
        this.pool?.release(slotOf(transaction.transactionalId));
      }
    }
  }

  protected override async recoverAndCommit(transaction: KafkaTransaction): Promise<void> {
    this.noteRestored(transaction);
    if (transaction.transactionalId === undefined) return;
    this.recovered.add(transaction.transactionalId);
    await (await this.connect()).endTransaction(handleOf(transaction), true);
  }

  protected override recoverAndAbort(transaction: KafkaTransaction): void {
    // Open transactions are stored before their first record, so they are empty; whatever the old
    // process began after that is aborted by fencing its id in finishRecoveringTransactions.
    this.noteRestored(transaction);
  }

  /**
   * Checks the transaction timeout against the broker, then fences every id this subtask (or a
   * subtask it took over after a rescale) may have used, except those just recovered: fencing
   * aborts what a crashed or frozen process left open, so read_committed consumers are not held at
   * the last stable offset and a zombie can neither write nor commit.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    if (this.guarantee !== "exactly-once") return;
    const context = this.runtimeContext;
    this.registerPrefix(context.subtaskIndex);
    const connection = await this.connect();
    await this.validateTransactionTimeout(context);
    this.pool = new TransactionalIdPool(this.prefix, context.subtaskIndex, this.poolSize);
    const poolSize = Math.max(this.restoredPoolSize, this.poolSize);
    const ids: string[] = [];
    // The ids of every old subtask whose transactions this one recovered (core gives each old subtask one owner).
    for (const subtask of this.recoveredSubtaskIndexes()) {
      for (let slot = 0; slot < poolSize; slot++) {
        const id = TransactionalIdPool.idOf(this.prefix, subtask, slot);
        if (this.recovered.has(id)) {
          // Committed just now from the restored checkpoint: a second restore of it must still find the epoch.
          if (subtask === context.subtaskIndex) this.pool.committed(slot, this.lastCheckpointId);
          continue;
        }
        ids.push(id);
      }
    }
    await forEachLimited(ids, FENCE_CONCURRENCY, (id) => connection.fence(id, this.timeoutMs));
    this.logger.info(
      { fenced: ids.length, recovered: this.recovered.size, restoredCheckpointId: this.lastCheckpointId },
      "kafka sink: recovered pending transactions and fenced the other transactional ids",
    );
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

  override async close(): Promise<void> {
    // First: a close that hangs must not keep the prefix from the next attempt's sink.
    this.releasePrefix();
    try {
      await Promise.allSettled([...this.inFlight]);
      await super.close();
    } finally {
      const producer = this.producer;
      this.producer = undefined;
      await Promise.allSettled([producer?.then((p) => p.disconnect()), this.connection?.disconnect()]);
      this.connection = undefined;
      this.connecting = undefined;
    }
  }

  // ---- internals --------------------------------------------------------------------------------

  /** Two sinks of one process sharing a prefix would fence each other's transactions: refuse the second. */
  private registerPrefix(subtaskIndex: number): void {
    const key = `${this.prefix}/${subtaskIndex}`;
    const holder = activePrefixes.get(key);
    if (holder !== undefined && holder !== this) {
      throw new ConfigurationError(
        "transactionalIdPrefix",
        `"${this.prefix}" is already used by another running KafkaSink (${holder.name}) of subtask ${subtaskIndex} in this process: sinks sharing a prefix fence each other's transactions. Give each sink its own transactionalIdPrefix`,
      );
    }
    activePrefixes.set(key, this);
    this.registeredPrefix = key;
  }

  /** Ends this sink's claim on its prefix (at close; a killed process's claim ends with it). */
  private releasePrefix(): void {
    if (this.registeredPrefix !== undefined && activePrefixes.get(this.registeredPrefix) === this) {
      activePrefixes.delete(this.registeredPrefix);
    }
    this.registeredPrefix = undefined;
  }

  private poolPrefix(): string {
    return `${this.prefix}-${this.runtimeContext.subtaskIndex}-`;
  }

  private noteRestored(transaction: KafkaTransaction): void {
    this.restoredPoolSize = Math.max(this.restoredPoolSize, transaction.poolSize ?? 0);
  }

  private connect(): Promise<KafkaConnection> {
    this.connecting ??= (async () => {
      const connection = new KafkaConnection(this.kafka);
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

  /** A write refused for a stale epoch becomes a typed error that says who took the id over. */
  private asFencedError(error: unknown, transaction: KafkaTransaction): unknown {
    const type = kafkaErrorType(error);
    if (type !== "INVALID_PRODUCER_EPOCH" && type !== "PRODUCER_FENCED") return error;
    const id = this.describeTransaction(transaction);
    const age = transaction.startedAt === undefined ? 0 : Date.now() - transaction.startedAt;
    const reason =
      age >= this.timeoutMs
        ? `the broker aborted it after transactionTimeout (${this.timeoutMs} ms; it is ${age} ms old). Nothing is lost: it was not pre-committed, and a restart replays it from the last checkpoint. Raise transactionTimeout or checkpoint more often`
        : "another process of this job (a newer instance that recovered), or another sink with the same transactionalIdPrefix, took over its transactional id. Make sure only one instance of the job runs and that prefixes are unique";
    return new TransactionError(
      "TRANSACTION_FENCED",
      `${this.name}: writing to transaction ${id} was refused: ${reason}`,
      {
        checkpointId: this.lastCheckpointId + 1,
        transactionId: transaction.transactionalId,
        cause: error,
      },
    );
  }

  private plainProducer(): Promise<Producer> {
    this.producer ??= (async () => {
      const producer = this.kafka.producer({
        allowAutoTopicCreation: false,
        createPartitioner: this.partitioner,
        ...(this.guarantee === "at-least-once" ? { idempotent: true, maxInFlightRequests: 1 } : {}),
      });
      await producer.connect();
      return producer;
    })();
    return this.producer;
  }

  private toTopicMessages(values: readonly IN[]): Array<{ topic: string; messages: Message[] }> {
    const byTopic = new Map<string, Message[]>();
    for (const value of values) {
      const topic = this.topicOf(value);
      const message: Message = {
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

  private async validateTransactionTimeout(context: RuntimeContext): Promise<void> {
    // The job's interval; the `checkpointInterval` option serves when the sink runs outside a job.
    const interval = context.checkpointingInterval ?? this.checkpointIntervalHint;
    if (interval !== undefined && this.timeoutMs <= interval) {
      throw new ConfigurationError(
        "transactionTimeout",
        `${this.timeoutMs} ms is not above the checkpoint interval (${interval} ms): every transaction would time out before its checkpoint completes. Set transactionTimeout well above the interval plus the longest expected downtime (for example 15 min)`,
      );
    }
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      const { brokers } = await admin.describeCluster();
      const resources = brokers.map((b) => ({
        type: 4, // ConfigResourceTypes.BROKER
        name: String(b.nodeId),
        configNames: ["transaction.max.timeout.ms"],
      }));
      const { resources: described } = await admin.describeConfigs({ resources, includeSynonyms: false });
      for (const resource of described) {
        const max = Number(
          resource.configEntries.find((e) => e.configName === "transaction.max.timeout.ms")?.configValue,
        );
        if (Number.isFinite(max) && this.timeoutMs > max) {
          throw new ConfigurationError(
            "transactionTimeout",
            `${this.timeoutMs} ms is above transaction.max.timeout.ms of broker ${resource.resourceName} (${max} ms): lower transactionTimeout to at most ${max}, or raise transaction.max.timeout.ms on the brokers`,
          );
        }
      }
    } catch (error) {
      if (error instanceof ConfigurationError) throw error;
      // Reading broker configs may be denied by ACLs; InitProducerId still rejects a too-long timeout.
      this.logger.warn(
        { error: (error as Error).message },
        "could not read transaction.max.timeout.ms from the brokers; transactionTimeout not checked",
      );
    } finally {
      await admin.disconnect();
    }
  }
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

function slotOf(transactionalId: string): number {
  return Number(transactionalId.slice(transactionalId.lastIndexOf("-") + 1));
}

function partitionerOf(custom: KafkaSinkOptions<unknown>["partitioner"]): ICustomPartitioner {
  if (custom === undefined) return Partitioners.DefaultPartitioner;
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
