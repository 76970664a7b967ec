/**
 * The connector's produce path: records partitioned in one pass, appended to one record batch per
 * partition, sent as Produce requests encoded here — several in flight per broker, at most one per
 * partition — and flushed before the checkpoint. With a transactional id the records belong to that
 * id's open transaction (exactly-once); without one the producer is idempotent only (at-least-once
 * and none): the same batching, sequence numbers and resends, visible as soon as acknowledged.
 *
 * Ordering and exactly-once: every partition is a lane with its own sequence numbers (0 after
 * InitProducerId, counted here). A batch gets its base sequence when it is sealed and keeps it: a
 * retriable error (leader moved, request timed out, connection lost) resends the same bytes after
 * a metadata refresh, and the broker drops what it already has (DUPLICATE_SEQUENCE_NUMBER, or the
 * original offset). With one request in flight per partition a later batch never overtakes an
 * earlier one. Any other error (OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch, a rejected record)
 * fails the producer: the sink's next write or its pre-commit throws, and the attempt restarts from
 * the last checkpoint, with the transaction aborted.
 *
 * A batch the topic refuses as too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE: the topic's
 * `max.message.bytes` is below the batch size) is split in halves that keep its sequence range
 * (`splitInHalves`, as the Java producer does), again down to one record per batch; only a refused
 * single-record batch fails the producer. Later batches of the topic are sealed at half the refused
 * size.
 *
 * Batching adapts to the round trip: a partition's open batch is sealed when its lane is free (or
 * the batch is full), so records that arrive while a request is in flight ride in the next batch.
 * With `lingerMs`, a free lane's batch also waits until it is that old (Kafka's `linger.ms`): the
 * records are invisible until the commit anyway, and fewer, larger requests cost the broker and
 * this thread less per record when records arrive slower than the round trip. A request to a
 * leader takes the lingering batches of its other free partitions along (Kafka's drain).
 */

import { KafkaDeliveryTimeoutError } from "../errors/kafka-delivery-timeout-error.js";
import { codecOfType } from "../protocol/compression/codecs.js";
import type { CompressionCodec, CompressionType } from "../protocol/compression/compression-codec.js";
import { compressRecordBatch } from "../protocol/compression/record-batch-compression.js";
import {
  decodeProduceResponse,
  encodeProduceRequest,
  PRODUCE_API_VERSION,
  PRODUCE_API_VERSION_ZSTD,
  type ProduceApiVersion,
} from "../protocol/produce-request.js";
import { RecordBatchBuilder } from "../protocol/record-batch-encoder.js";
import { RECORD_BATCH_HEADER_BYTES } from "../protocol/record-batch-layout.js";
import { BufferPool } from "./buffer-pool.js";
import type { ProducerMessage } from "./producer-message.js";
import { messagesOfBatch, nextSequence, type SealedBatch, splitInHalves } from "./sealed-batch.js";

export type { ProducerMessage } from "./producer-message.js";

/** Records for one topic. */
export interface TopicMessages {
  readonly topic: string;
  readonly messages: readonly ProducerMessage[];
}

/** What the producer needs from the cluster connection (kafkajs keeps connections, metadata, SASL). */
export interface ProduceCluster {
  /** The topic's partitions from (cached) metadata, loading the topic's metadata the first time. */
  partitionMetadata(topic: string): Promise<ReadonlyArray<{ partitionId: number; leader: number }>>;
  /** The node id of the partition's leader in the current metadata. */
  leaderOf(topic: string, partition: number): number | undefined;
  refreshMetadata(): Promise<void>;
  /**
   * Sends one Produce request to a broker and returns the response body. `encode(clientId)` writes
   * the whole request as `encodeProduceRequest` does, once the connection is known; the cluster sets
   * its correlation id and writes it to the socket as it is. Without an answer within `timeoutMs`
   * it fails with a retriable request timeout.
   */
  produce(nodeId: number, encode: (clientId: string | null) => Buffer, timeoutMs: number): Promise<Buffer>;
  /** Called after a request to `nodeId` failed on its connection. */
  connectionFailed(nodeId: number, error: unknown): Promise<void>;
  /** AddPartitionsToTxn for partitions not yet in the transaction (retried inside). */
  addPartitions(topics: Array<{ topic: string; partitions: Array<{ partition: number }> }>): Promise<void>;
  /** The kafkajs protocol error for a broker error code (typed, with `retriable`). */
  errorFromCode(code: number): Error;
}

/** Limits and identity of one producer. */
export interface IdempotentProducerOptions {
  /** The id whose open transaction the records join; `null`: idempotent only, outside transactions. */
  readonly transactionalId: string | null;
  readonly producerId: bigint;
  readonly producerEpoch: number;
  readonly cluster: ProduceCluster;
  /** kafkajs's partitioner function (one instance per producer: it keeps the round-robin counter). */
  readonly partitioner: (args: {
    topic: string;
    partitionMetadata: Array<{ partitionId: number; leader: number }>;
    message: ProducerMessage;
  }) => number;
  /** Turns a failed send into the error the sink throws; gets the records of the failed batch. */
  readonly mapFailure: (error: unknown, records: TopicMessages[]) => unknown;
  /** Resends of one batch after retriable errors, with exponential backoff. */
  readonly retry: { retries: number; initialRetryTime: number; maxRetryTime: number; multiplier: number };
  /** A batch is sealed at this size (default 256 KiB); a lone larger record gets a batch of its own. */
  readonly batchBytes?: number;
  /**
   * The largest Produce request (`max.request.size`, default 1 MiB); a record whose batch alone is
   * larger is refused by `send` (an error of type `RECORD_TOO_LARGE`, through `mapFailure`).
   */
  readonly maxRequestBytes?: number;
  /** Produce requests in flight per broker (default 5, Kafka's limit for idempotent producers). */
  readonly maxInFlightRequestsPerBroker?: number;
  /**
   * A partition's batch that is not full waits at most this long, from its first record, for more
   * records before it is sent (default 0: as soon as the partition has no request in flight).
   * `flush` sends every batch at once.
   */
  readonly lingerMs?: number;
  /** Sealed, unacknowledged bytes above which `send` waits (default 16 MiB). */
  readonly maxBufferedBytes?: number;
  /** The broker's wait for acks=all and the client's for the answer (`request.timeout.ms`, default 30 s). */
  readonly requestTimeoutMs?: number;
  /**
   * The longest from a batch's first record to its acknowledgement, resends included
   * (`delivery.timeout.ms`, default 120 s); past it the producer fails with a
   * {@link KafkaDeliveryTimeoutError}.
   */
  readonly deliveryTimeoutMs?: number;
  /**
   * Each batch's records compressed when it is sealed (Kafka's `compression.type`, default
   * `none`). `batchBytes` counts the records before compression.
   */
  readonly compression?: CompressionType;
}

const DEFAULT_BATCH_BYTES = 256 * 1024;
const DEFAULT_MAX_IN_FLIGHT = 5;
const DEFAULT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const DEFAULT_DELIVERY_TIMEOUT_MS = 120_000;
/** A request carries the head batch of each ready partition of its broker, up to this size. */
const DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024;
/** The pool keeps buffers of request bodies up to this size. */
const POOLED_REQUEST_BYTES = 8 * 1024 * 1024;
/**
 * This thread's buffers for batches and request bodies, shared by its producers (one per
 * transaction): about what one producer keeps sealed by default, plus a request body.
 */
const producedBuffers = new BufferPool(DEFAULT_MAX_BUFFERED_BYTES + POOLED_REQUEST_BYTES);
const ACKS_ALL = -1;
const NONE = 0;
const DUPLICATE_SEQUENCE_NUMBER = 46;

interface Lane {
  readonly topic: string;
  readonly partition: number;
  builder: RecordBatchBuilder | undefined;
  /** The pooled buffer given to `builder`. */
  slab: Buffer | undefined;
  /**
   * When `builder` got its first record, for `lingerMs` and `deliveryTimeoutMs`:
   * `performance.now()`, since a wall clock that steps back must not stretch either.
   */
  openedAt: number;
  readonly queue: SealedBatch[];
  /** A request for the head batch is in flight, or it waits to be resent. */
  busy: boolean;
  nextSequence: number;
  added: boolean;
}

/**
 * One producer id's producer: one open transaction's, or an idempotent producer outside
 * transactions. `send` returns once the records are batched (waiting only when too much is
 * unacknowledged); `flush` returns when every record is acknowledged, or throws the first failure;
 * `close` stops sending and waits for what is in flight.
 *
 * @example
 * ```ts
 * const producer = new IdempotentProducer({ transactionalId, producerId, producerEpoch, cluster,
 *   partitioner, mapFailure: (error) => error, retry: { retries: 5, initialRetryTime: 300, maxRetryTime: 30_000, multiplier: 2 } });
 * await producer.send([{ topic: "orders", messages: [{ value: "a" }] }]);
 * await producer.flush();
 * ```
 */
export class IdempotentProducer {
  /** Every lane, in the order they were made; `topicLanes` finds them by topic and partition. */
  private readonly lanes: Lane[] = [];
  private readonly topicLanes = new Map<string, Lane[]>();
  private readonly batchBytes: number;
  /** Smaller batch sizes for topics that refused a batch as too large. */
  private readonly topicBatchBytes = new Map<string, number>();
  private readonly maxInFlight: number;
  private readonly maxBufferedBytes: number;
  private readonly lingerMs: number;
  private readonly requestTimeoutMs: number;
  private readonly deliveryTimeoutMs: number;
  private readonly maxRequestBytes: number;
  private readonly codec: CompressionCodec | undefined;
  /** Version 7 for zstd batches (brokers refuse them below), else 3. */
  private readonly produceVersion: ProduceApiVersion;
  private readonly requestsInFlight = new Map<number, number>();
  private readonly pending = new Set<Promise<void>>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  /** Pumps again when the oldest lingering batch is due (`lingerMs`). */
  private lingerTimer: NodeJS.Timeout | undefined;
  private bufferedBytes = 0;
  private failure: { error: unknown } | undefined;
  private closed = false;
  private waiters: Array<() => void> = [];
  private adding: Promise<void> = Promise.resolve();
  private refreshing: Promise<void> | undefined;

  constructor(private readonly options: IdempotentProducerOptions) {
    this.batchBytes = options.batchBytes ?? DEFAULT_BATCH_BYTES;
    this.maxInFlight = options.maxInFlightRequestsPerBroker ?? DEFAULT_MAX_IN_FLIGHT;
    this.maxBufferedBytes = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.lingerMs = options.lingerMs ?? 0;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.deliveryTimeoutMs = options.deliveryTimeoutMs ?? DEFAULT_DELIVERY_TIMEOUT_MS;
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    this.codec = codecOfType(options.compression ?? "none");
    this.produceVersion = this.codec?.name === "zstd" ? PRODUCE_API_VERSION_ZSTD : PRODUCE_API_VERSION;
  }

  /** Partitions and batches the records and sends what is ready; throws an earlier send's failure. */
  async send(topicMessages: readonly TopicMessages[]): Promise<void> {
    this.throwIfFailed();
    if (this.closed) throw new Error("IdempotentProducer: send after close");
    const now = Date.now();
    const { cluster, partitioner } = this.options;
    for (const { topic, messages } of topicMessages) {
      if (messages.length === 0) continue;
      const partitionMetadata = (await cluster.partitionMetadata(topic)) as Array<{
        partitionId: number;
        leader: number;
      }>;
      this.throwIfFailed();
      let lanes = this.topicLanes.get(topic);
      if (lanes === undefined) {
        lanes = [];
        this.topicLanes.set(topic, lanes);
      }
      const batchBytes = this.topicBatchBytes.get(topic) ?? this.batchBytes;
      // One pass: each record goes straight into its partition's open batch.
      for (const message of messages) {
        const partition = partitioner({ topic, partitionMetadata, message });
        const lane = lanes[partition] ?? this.newLane(lanes, topic, partition);
        let builder = lane.builder ?? this.newBuilder(lane, batchBytes);
        if (!builder.tryAppend(message, now)) {
          this.seal(lane);
          this.pump();
          builder = this.newBuilder(lane, batchBytes);
          builder.tryAppend(message, now);
        }
        // Only a lone record (in a batch of its own) can be over it: batches are at most batchBytes.
        if (builder.sizeInBytes > this.maxRequestBytes) this.refuseTooLarge(lane, message);
      }
    }
    this.pump();
    while (this.bufferedBytes > this.maxBufferedBytes && this.failure === undefined && !this.closed) {
      await this.changed();
    }
    this.throwIfFailed();
  }

  /** Sends every open batch and waits until all are acknowledged; throws the first failure. */
  async flush(): Promise<void> {
    this.throwIfFailed();
    for (const lane of this.lanes) if (lane.builder !== undefined) this.seal(lane);
    this.pump();
    while (this.bufferedBytes > 0 && this.failure === undefined && !this.closed) await this.changed();
    this.throwIfFailed();
    if (this.bufferedBytes > 0)
      throw new Error("IdempotentProducer: closed before every record was acknowledged");
  }

  /** Sends nothing more and waits for the requests in flight (before the transaction is aborted). */
  async close(): Promise<void> {
    this.closed = true;
    this.stopTimers();
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    this.wake();
  }

  /** Throws the failure of an earlier send, if one failed (what `send` and `flush` throw first). */
  throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  // ---- internals --------------------------------------------------------------------------------

  private newLane(lanes: Lane[], topic: string, partition: number): Lane {
    if (!Number.isInteger(partition) || partition < 0) {
      throw new Error(
        `the partitioner chose partition ${partition} of topic '${topic}': it must return a partition number`,
      );
    }
    const lane: Lane = {
      topic,
      partition,
      builder: undefined,
      slab: undefined,
      openedAt: 0,
      queue: [],
      busy: false,
      nextSequence: 0,
      // Outside a transaction there is nothing to join (no AddPartitionsToTxn).
      added: this.options.transactionalId === null,
    };
    lanes[partition] = lane;
    this.lanes.push(lane);
    return lane;
  }

  private newBuilder(lane: Lane, batchBytes: number): RecordBatchBuilder {
    lane.slab = producedBuffers.take(batchBytes);
    lane.openedAt = performance.now();
    lane.builder = new RecordBatchBuilder(batchBytes, lane.slab);
    return lane.builder;
  }

  /** Closes the lane's open batch with the lane's next sequence number and queues it. */
  private seal(lane: Lane): void {
    const builder = lane.builder;
    if (builder === undefined || builder.count === 0) return;
    const baseSequence = lane.nextSequence;
    const finished = builder.finish({
      producerId: this.options.producerId,
      producerEpoch: this.options.producerEpoch,
      baseSequence,
      transactional: this.options.transactionalId !== null,
    });
    // Compressed into a buffer of its own: the slab is free again at once.
    const bytes = this.codec === undefined ? finished : compressRecordBatch(finished, this.codec);
    lane.nextSequence = nextSequence(baseSequence, builder.count);
    let slab = lane.slab;
    if (slab !== undefined && (!builder.isWrittenIn(slab) || bytes !== finished)) {
      // A lone record larger than the batch got its own buffer (the slab was never written), or the
      // batch was compressed out of it.
      producedBuffers.give(slab);
      slab = undefined;
    }
    lane.queue.push({
      bytes,
      slab,
      count: builder.count,
      baseSequence,
      attempts: 0,
      createdAt: lane.openedAt,
    });
    lane.builder = undefined;
    lane.slab = undefined;
    this.bufferedBytes += bytes.length;
  }

  /** Sends the head batch of every free lane, grouped by leader, within the in-flight limits. */
  private pump(): void {
    if (this.failure !== undefined || this.closed) return;
    const ready = new Map<number, Lane[]>();
    const now = this.lingerMs > 0 ? performance.now() : 0;
    const lingering: Lane[] = [];
    for (const lane of this.lanes) {
      // A busy lane is pumped again when its request settles.
      if (lane.busy) continue;
      // A free lane seals what gathered while its last request was in flight, once it lingered.
      if (lane.queue.length === 0 && lane.builder !== undefined) {
        if (this.lingerMs === 0 || now - lane.openedAt >= this.lingerMs) this.seal(lane);
        else lingering.push(lane);
      }
      if (lane.queue.length === 0) continue;
      const leader = this.options.cluster.leaderOf(lane.topic, lane.partition);
      if (leader === undefined) {
        this.retryLater(lane, this.options.cluster.errorFromCode(LEADER_NOT_AVAILABLE));
        continue;
      }
      let list = ready.get(leader);
      if (list === undefined) {
        list = [];
        ready.set(leader, list);
      }
      list.push(lane);
    }
    // A request to a leader takes the lingering batches of its other partitions along, as Kafka's
    // producer drains a ready node: one request instead of one per partition as each comes due.
    let oldestLingering = Number.POSITIVE_INFINITY;
    for (const lane of lingering) {
      const leader = this.options.cluster.leaderOf(lane.topic, lane.partition);
      const list = leader === undefined ? undefined : ready.get(leader);
      if (list === undefined) {
        oldestLingering = Math.min(oldestLingering, lane.openedAt);
        continue;
      }
      this.seal(lane);
      list.push(lane);
    }
    for (const [nodeId, lanes] of ready) {
      let next = 0;
      while (next < lanes.length && (this.requestsInFlight.get(nodeId) ?? 0) < this.maxInFlight) {
        const request: Lane[] = [];
        let bytes = 0;
        while (next < lanes.length) {
          const lane = lanes[next] as Lane;
          const size = (lane.queue[0] as SealedBatch).bytes.length;
          if (request.length > 0 && bytes + size > this.maxRequestBytes) break;
          request.push(lane);
          bytes += size;
          next++;
        }
        for (const lane of request) lane.busy = true;
        this.requestsInFlight.set(nodeId, (this.requestsInFlight.get(nodeId) ?? 0) + 1);
        const sent: Promise<void> = this.produce(nodeId, request).finally(() => {
          this.pending.delete(sent);
          this.requestsInFlight.set(nodeId, (this.requestsInFlight.get(nodeId) ?? 1) - 1);
          this.pumpOrFail();
          this.wake();
        });
        this.pending.add(sent);
      }
    }
    if (oldestLingering !== Number.POSITIVE_INFINITY) this.lingerUntil(oldestLingering + this.lingerMs, now);
  }

  /**
   * `pump` from a timer or a settled request, where nothing would catch what it throws: a failure
   * of the producer instead, which the next `send` or `flush` throws.
   */
  private pumpOrFail(): void {
    try {
      this.pump();
    } catch (error) {
      this.fail(error);
    }
  }

  /** Pumps again at `due`, unless a pump is already set for then or earlier. */
  private lingerUntil(due: number, now: number): void {
    if (this.lingerTimer !== undefined) return;
    this.lingerTimer = setTimeout(
      () => {
        this.lingerTimer = undefined;
        this.pumpOrFail();
      },
      Math.max(0, due - now),
    );
    // An open batch alone must not keep the process alive: flush or close settles it.
    this.lingerTimer.unref();
  }

  /** One Produce request with the head batch of each lane; settles each lane's batch. */
  private async produce(nodeId: number, lanes: Lane[]): Promise<void> {
    const { cluster } = this.options;
    try {
      await this.addToTransaction(lanes);
    } catch (error) {
      // AddPartitionsToTxn was retried already: what remains is not a leader problem.
      this.fail(error, lanes[0] as Lane);
      return;
    }
    if (this.closed || this.failure !== undefined) {
      for (const lane of lanes) lane.busy = false;
      return;
    }
    let responses: ReturnType<typeof decodeProduceResponse>;
    try {
      let requestBuffer: Buffer | undefined;
      const response = await cluster.produce(
        nodeId,
        (clientId) =>
          encodeProduceRequest({
            clientId,
            transactionalId: this.options.transactionalId,
            acks: ACKS_ALL,
            timeoutMs: this.requestTimeoutMs,
            partitions: lanes.map((lane) => ({
              topic: lane.topic,
              partition: lane.partition,
              batch: (lane.queue[0] as SealedBatch).bytes,
            })),
            version: this.produceVersion,
            allocate: (size) => {
              requestBuffer = producedBuffers.take(size);
              return requestBuffer;
            },
          }),
        this.requestTimeoutMs,
      );
      // Answered: the socket handed every byte of the request to the kernel before the broker could
      // answer. Only then is the buffer reused; a failed request's may still sit in the socket's
      // queue (a timeout on a stalled connection) and is left to the garbage collector.
      if (requestBuffer !== undefined) producedBuffers.give(requestBuffer);
      responses = decodeProduceResponse(response, this.produceVersion);
    } catch (error) {
      if (!isRetriable(error)) {
        this.fail(error, lanes[0] as Lane);
        return;
      }
      await cluster.connectionFailed(nodeId, error).catch(() => undefined);
      for (const lane of lanes) this.retryLater(lane, error);
      return;
    }
    const codes = new Map<string, number>();
    for (const r of responses) codes.set(`${r.topic}\u0000${r.partition}`, r.errorCode);
    for (const lane of lanes) {
      const code = codes.get(`${lane.topic}\u0000${lane.partition}`);
      if (code === NONE || code === DUPLICATE_SEQUENCE_NUMBER) {
        const done = lane.queue.shift() as SealedBatch;
        this.bufferedBytes -= done.bytes.length;
        // Acknowledged: nothing sends these bytes again.
        if (done.slab !== undefined) producedBuffers.give(done.slab);
        lane.busy = false;
        continue;
      }
      if (
        (code === MESSAGE_TOO_LARGE || code === RECORD_LIST_TOO_LARGE) &&
        (lane.queue[0] as SealedBatch).count > 1
      ) {
        // The topic's limit is below this batch, perhaps not below its records: send it in halves.
        this.split(lane);
        lane.busy = false;
        continue;
      }
      const error =
        code === undefined
          ? new Error(`the broker did not answer for ${lane.topic}-${lane.partition} in its Produce response`)
          : cluster.errorFromCode(code);
      if (isRetriable(error)) this.retryLater(lane, error);
      else this.fail(error, lane);
    }
  }

  /**
   * Replaces the lane's head batch (refused as too large, so not appended) by two batches of half
   * its records each in the same sequence range; the batches queued behind keep theirs. Later
   * batches of the topic are sealed smaller.
   */
  private split(lane: Lane): void {
    const refused = lane.queue.shift() as SealedBatch;
    const halves = splitInHalves(refused, this.options);
    for (const half of halves) half.createdAt = refused.createdAt;
    lane.queue.unshift(...halves);
    this.bufferedBytes += halves[0].bytes.length + halves[1].bytes.length - refused.bytes.length;
    // A compressed batch's size stands for its records' (larger) one: smaller than needed, safe.
    const smaller = Math.max(RECORD_BATCH_HEADER_BYTES, Math.floor(refused.bytes.length / 2));
    if (smaller < (this.topicBatchBytes.get(lane.topic) ?? this.batchBytes)) {
      this.topicBatchBytes.set(lane.topic, smaller);
    }
  }

  /** AddPartitionsToTxn for the lanes' partitions not yet in the transaction, one call at a time. */
  private addToTransaction(lanes: readonly Lane[]): Promise<void> {
    if (lanes.every((lane) => lane.added)) return Promise.resolve();
    const added = this.adding.then(async () => {
      const missing = lanes.filter((lane) => !lane.added);
      if (missing.length === 0) return;
      const byTopic = new Map<string, Array<{ partition: number }>>();
      for (const lane of missing) {
        const list = byTopic.get(lane.topic) ?? [];
        list.push({ partition: lane.partition });
        byTopic.set(lane.topic, list);
      }
      await this.options.cluster.addPartitions(
        [...byTopic].map(([topic, partitions]) => ({ topic, partitions })),
      );
      for (const lane of missing) lane.added = true;
    });
    this.adding = added.catch(() => undefined);
    return added;
  }

  /** Resends the lane's head batch (same bytes, same sequence) after backoff and fresh metadata. */
  private retryLater(lane: Lane, error: unknown): void {
    const batch = lane.queue[0] as SealedBatch;
    batch.attempts++;
    const { retries, initialRetryTime, maxRetryTime, multiplier } = this.options.retry;
    if (batch.attempts > retries) {
      this.fail(error, lane);
      return;
    }
    const left = this.deliveryTimeoutMs - (performance.now() - (batch.createdAt ?? performance.now()));
    if (left <= 0) {
      this.fail(this.deliveryTimedOut(lane, error), lane);
      return;
    }
    lane.busy = true;
    const backoff = Math.min(maxRetryTime, initialRetryTime * multiplier ** (batch.attempts - 1));
    const delay = backoff * (0.8 + Math.random() * 0.4);
    const timer = setTimeout(
      () => {
        this.retryTimers.delete(timer);
        // The resend would start past the delivery timeout: the batch has waited its longest.
        if (delay >= left) {
          this.fail(this.deliveryTimedOut(lane, error), lane);
          return;
        }
        // A refresh against unreachable brokers takes kafkajs's retries: the deadline does not wait.
        const deadline = batch.createdAt === undefined ? undefined : batch.createdAt + this.deliveryTimeoutMs;
        const resume: Promise<void> = this.refreshMetadata(deadline).then(() => {
          if (deadline !== undefined && performance.now() >= deadline) {
            this.fail(this.deliveryTimedOut(lane, error), lane);
            return;
          }
          lane.busy = false;
          this.pumpOrFail();
        });
        this.pending.add(resume);
        void resume.finally(() => this.pending.delete(resume));
      },
      Math.min(delay, left),
    );
    this.retryTimers.add(timer);
  }

  /** The error of a head batch of `lane` not acknowledged within `deliveryTimeoutMs`. */
  private deliveryTimedOut(lane: Lane, lastError: unknown): KafkaDeliveryTimeoutError {
    const batch = lane.queue[0] as SealedBatch;
    return new KafkaDeliveryTimeoutError(
      `${batch.count} record(s) for ${lane.topic} partition ${lane.partition} were not acknowledged within deliveryTimeoutMs (${this.deliveryTimeoutMs} ms; ${batch.attempts} attempt(s), the last failed with: ${(lastError as Error)?.message ?? String(lastError)}): check that the partition's leader is reachable, or raise deliveryTimeoutMs`,
      {
        topic: lane.topic,
        partition: lane.partition,
        records: batch.count,
        attempts: batch.attempts,
        deliveryTimeoutMs: this.deliveryTimeoutMs,
      },
      { cause: lastError },
    );
  }

  /**
   * Refuses the record just appended to `lane`'s open batch (alone in it) as larger than
   * `maxRequestBytes`, as the Java producer's RecordTooLargeException: the batch is dropped and the
   * error goes through `mapFailure`. The producer itself goes on.
   */
  private refuseTooLarge(lane: Lane, message: ProducerMessage): never {
    const size = lane.builder?.sizeInBytes ?? 0;
    if (lane.slab !== undefined) producedBuffers.give(lane.slab);
    lane.builder = undefined;
    lane.slab = undefined;
    const error = Object.assign(
      new Error(
        `a record of ${size} bytes (serialized, with its batch's framing) for ${lane.topic} is larger than maxRequestSize (${this.maxRequestBytes})`,
      ),
      { type: "RECORD_TOO_LARGE", retriable: false, recordBytes: size, maxRequestSize: this.maxRequestBytes },
    );
    throw this.options.mapFailure(error, [{ topic: lane.topic, messages: [message] }]);
  }

  /**
   * One metadata refresh for every lane that waits on it; its failure shows in the next send. A
   * caller with a `deadline` (`performance.now()` time) stops waiting for it then.
   */
  private refreshMetadata(deadline?: number): Promise<void> {
    this.refreshing ??= this.options.cluster
      .refreshMetadata()
      .catch(() => undefined)
      .finally(() => {
        this.refreshing = undefined;
      });
    if (deadline === undefined) return this.refreshing;
    let timer: NodeJS.Timeout | undefined;
    const due = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadline - performance.now()));
    });
    return Promise.race([this.refreshing, due]).finally(() => clearTimeout(timer));
  }

  /** Fails the producer with `error`; `lane`'s head batch, if given, is what the error is about. */
  private fail(error: unknown, lane?: Lane): void {
    if (this.failure === undefined) {
      const batch = lane?.queue[0];
      const messages = batch === undefined ? [] : messagesOfBatch(batch.bytes);
      const records = lane === undefined ? [] : [{ topic: lane.topic, messages }];
      this.failure = { error: this.options.mapFailure(error, records) };
      this.stopTimers();
    }
    this.wake();
  }

  /** No resend and no lingering batch is sent after a failure or a close. */
  private stopTimers(): void {
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  /** Resolves when something changed: an acknowledgement, a failure, a close. */
  private changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

const LEADER_NOT_AVAILABLE = 5;
/** The batch is over the topic's `max.message.bytes` (or the broker's `message.max.bytes`). */
const MESSAGE_TOO_LARGE = 10;
/** The batch is over the topic's segment size. */
const RECORD_LIST_TOO_LARGE = 18;

/** Leader moves, timeouts and lost connections are resent; everything else fails the send. */
function isRetriable(error: unknown): boolean {
  return (error as { retriable?: unknown } | null)?.retriable === true;
}
