import {
  type Counter,
  DeserializationError,
  type Logger,
  MetricNames,
  type SourceBatch,
  type SourceReader,
  type SourceReaderContext,
} from "@onceflow/core";
import type { Admin, Kafka, Producer } from "kafkajs";
import {
  type FetchedPartition,
  KafkaConnection,
  NO_HEADERS,
  offsetAfter,
  offsetOutOfRange,
  type RawOffset,
  type RawRecord,
} from "../internal/kafkajs/internals.js";
import { type DeserializationContext, type Deserializer, ignoresContext } from "./deserializer.js";
import { type KafkaPartitionSplit, splitIdOf } from "./kafka-partition-split.js";
import type { KafkaRecord } from "./kafka-record.js";
import type {
  DeserializationErrorPolicy,
  OffsetResetStrategy,
  StartingOffsets,
  StoppingOffsets,
} from "./kafka-source-options.js";
import { OffsetsResolver, offsetKey } from "./offsets-resolver.js";
import { PartitionLag } from "./partition-lag.js";

/** The resolved settings a reader runs with (defaults filled in by `KafkaSource`). */
export interface KafkaSourceReaderConfig<K, V, H> {
  readonly kafka: Kafka;
  readonly groupId: string | undefined;
  readonly startingOffsets: StartingOffsets;
  readonly stoppingOffsets: StoppingOffsets | undefined;
  readonly key: Deserializer<K>;
  readonly value: Deserializer<V>;
  readonly headers: Deserializer<H>;
  readonly onDeserializationError: DeserializationErrorPolicy;
  readonly commitOffsetsOnCheckpoint: boolean;
  readonly autoCommit: boolean;
  readonly autoCommitIntervalMs: number;
  readonly readCommitted: boolean;
  readonly maxPrefetchBytes: number;
  readonly maxBatchSize: number;
  readonly fetchMaxWaitMs: number;
  readonly maxBytesPerPartition: number;
}

interface Chunk {
  readonly records: RawRecord[];
  index: number;
  /** The position after this chunk, past control and aborted batches too. */
  readonly nextOffset: bigint;
  readonly bytes: number;
}

interface PartitionState {
  readonly split: KafkaPartitionSplit;
  readonly topic: string;
  readonly partition: number;
  /** The next offset to hand out: the position a checkpoint records. */
  nextOffset: bigint;
  /** The next offset to fetch (ahead of `nextOffset` by what is buffered). */
  fetchOffset: bigint;
  readonly stoppingOffset: bigint | undefined;
  readonly chunks: Chunk[];
  inFlight: boolean;
  /** Given to deserializers that never read it (the built-in ones); its offset is not set. */
  readonly context: DeserializationContext;
}

/** A record that could not be deserialized: where it is, and the error, for the policy to handle. */
class Undeserializable {
  constructor(
    readonly context: DeserializationContext,
    readonly error: unknown,
  ) {}
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5000;

/**
 * Reads the partitions assigned to one subtask with Fetch requests of its own — no consumer group
 * membership, so no rebalance can move a partition or replay records behind the checkpoint's back.
 * One fetch at a time per leader broker; fetched records wait in a buffer bounded by
 * `maxPrefetchBytes` (the backpressure) until `pollNext` hands them out, and only then does the
 * position that `snapshotState` returns move.
 *
 * The runtime creates it through {@link KafkaSource.createReader}; tests can drive it by hand.
 *
 * @example
 * ```ts
 * const reader = source.createReader(readerContext);
 * await reader.addSplits(await source.discoverSplits(enumeratorContext));
 * await reader.isAvailable();
 * const batch = await reader.pollNext(); // { splitId: "orders-0", records, timestamps }
 * const positions = reader.snapshotState(1); // next offsets after the records handed out
 * ```
 */
export class KafkaSourceReader<K, V, H> implements SourceReader<KafkaRecord<K, V, H>, KafkaPartitionSplit> {
  private readonly partitions = new Map<string, PartitionState>();
  private readonly connection: KafkaConnection;
  private readonly admin: Admin;
  private readonly resolver: OffsetsResolver;
  private readonly logger: Logger;
  private readonly skipped: Counter;
  private readonly deadLettered: Counter;
  private readonly lag: PartitionLag;
  private readonly labels: Record<string, string>;
  private deadLetterProducer: Producer | undefined;
  private connected: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;
  private failure: unknown;
  private restored = false;
  private bufferedBytes = 0;
  private roundRobin = 0;
  private wakeLoop: (() => void) | undefined;
  private wakeReaders: (() => void) | undefined;
  private readonly inFlightLeaders = new Set<number>();
  private readonly pendingCommits = new Map<
    number,
    Array<{ topic: string; partition: number; offset: bigint }>
  >();
  private checkpointingSeen = false;
  private autoCommitTimer: NodeJS.Timeout | undefined;
  private lastAutoCommitted = "";
  /** Whether a deserializer may read the context: else one is made only for a record that fails. */
  private readonly needsContext: boolean;

  /** @internal Readers come from {@link KafkaSource.createReader}. */
  constructor(
    private readonly config: KafkaSourceReaderConfig<K, V, H>,
    context: SourceReaderContext,
  ) {
    this.connection = new KafkaConnection(config.kafka, { readCommitted: config.readCommitted });
    this.needsContext = !(
      ignoresContext(config.key) &&
      ignoresContext(config.value) &&
      ignoresContext(config.headers)
    );
    this.admin = config.kafka.admin();
    this.resolver = new OffsetsResolver(this.admin, config.groupId);
    this.logger = context.logger.child({ source: "kafka", subtask: context.subtaskIndex });
    this.labels = {
      job: context.jobId,
      operator: context.operatorUid,
      subtask: String(context.subtaskIndex),
    };
    this.skipped = context.metrics.counter(MetricNames.recordsSkipped, "Records skipped by a source");
    this.lag = new PartitionLag(context, config.readCommitted);
    // When the runtime says checkpointing is on, auto-commit never starts (Flink ignores
    // enable.auto.commit with checkpointing too); otherwise the first checkpoint stops it.
    if (context.checkpointingInterval !== undefined) this.checkpointingSeen = true;
    this.restored = context.isRestored;
    this.deadLettered = context.metrics.counter(
      MetricNames.recordsDeadLettered,
      "Records written to a dead-letter topic",
    );
    this.skipped.inc(0, this.labels);
    this.deadLettered.inc(0, this.labels);
  }

  private ensureConnected(): Promise<void> {
    this.connected ??= (async () => {
      await Promise.all([this.connection.connect(), this.admin.connect()]);
      this.loop = this.fetchLoop();
      if (this.config.autoCommit && this.config.groupId !== undefined) {
        this.autoCommitTimer = setInterval(() => void this.autoCommitNow(), this.config.autoCommitIntervalMs);
        this.autoCommitTimer.unref();
      }
    })();
    return this.connected;
  }

  async start(): Promise<void> {
    await this.ensureConnected();
  }

  async addSplits(splits: KafkaPartitionSplit[]): Promise<void> {
    await this.ensureConnected();
    const fresh = splits.filter((s) => !this.partitions.has(s.splitId));
    if (fresh.some((s) => s.nextOffset !== undefined)) this.restored = true;
    // A reader that restored a checkpoint treats partitions it has no position for as new ones.
    const initial = fresh.filter(
      (s) => s.nextOffset === undefined && s.pendingStart !== "earliest" && !this.restored,
    );
    const earliest = fresh.filter((s) => s.nextOffset === undefined && !initial.includes(s));
    const starts = new Map([
      ...(await this.resolver.start(initial, this.config.startingOffsets)),
      ...(await this.resolver.reset(earliest, "earliest")),
    ]);
    const stopping = this.config.stoppingOffsets;
    const needStop = stopping === undefined ? [] : fresh.filter((s) => s.stoppingOffset === undefined);
    const stops =
      stopping === undefined ? new Map<string, bigint>() : await this.resolver.stop(needStop, stopping);
    for (const split of fresh) {
      const key = offsetKey(split.topic, split.partition);
      const start = split.nextOffset !== undefined ? BigInt(split.nextOffset) : starts.get(key);
      if (start === undefined) {
        throw new Error(`no start offset found for ${split.topic} partition ${split.partition}`);
      }
      const stop = split.stoppingOffset !== undefined ? BigInt(split.stoppingOffset) : stops.get(key);
      this.partitions.set(split.splitId, {
        split,
        topic: split.topic,
        partition: split.partition,
        nextOffset: start,
        fetchOffset: start,
        stoppingOffset: stop,
        chunks: [],
        inFlight: false,
        context: Object.freeze({ topic: split.topic, partition: split.partition, offset: "" }),
      });
      this.logger.debug(
        { topic: split.topic, partition: split.partition, offset: String(start), stop: stop?.toString() },
        "kafka partition assigned",
      );
    }
    this.wake();
  }

  async pollNext(): Promise<SourceBatch<KafkaRecord<K, V, H>> | undefined> {
    if (this.failure !== undefined) throw this.failure;
    const states = [...this.partitions.values()];
    for (let tried = 0; tried < states.length; tried++) {
      const state = states[(this.roundRobin + tried) % states.length];
      if (state === undefined || state.chunks.length === 0) continue;
      const batch = await this.take(state);
      if (batch !== undefined) {
        this.roundRobin = (this.roundRobin + tried + 1) % states.length;
        return batch;
      }
    }
    return undefined;
  }

  /** Hands out up to `maxBatchSize` records of one partition and moves its position past them. */
  private async take(state: PartitionState): Promise<SourceBatch<KafkaRecord<K, V, H>> | undefined> {
    const records: KafkaRecord<K, V, H>[] = [];
    const timestamps: number[] = [];
    const maxBatchSize = this.config.maxBatchSize;
    const stoppingOffset = state.stoppingOffset;
    // The stopping offset as a number, for number offsets: exact up to 2^53, and any larger one
    // (rounded to 2^53 or more) still above every number offset.
    const stopNumber = stoppingOffset === undefined ? Infinity : Number(stoppingOffset);
    // The last record handed out (or skipped) whose offset `state.nextOffset` does not have yet:
    // moved once per chunk, not with a bigint per record, and always before an `await`.
    let last: RawOffset | undefined;
    let freed = 0;
    while (records.length < maxBatchSize) {
      const chunk = state.chunks[0];
      if (chunk === undefined) break;
      while (chunk.index < chunk.records.length && records.length < maxBatchSize) {
        const raw = chunk.records[chunk.index] as RawRecord;
        const offset = raw.offset;
        if (
          typeof offset === "number"
            ? offset >= stopNumber
            : stoppingOffset !== undefined && offset >= stoppingOffset
        ) {
          chunk.index = chunk.records.length;
          break;
        }
        chunk.index++;
        // Synchronous on the happy path: an `await` per record was a promise and a microtask hop
        // each. Only a record that cannot be deserialized waits (for its policy, perhaps the dead
        // letter topic), still before the position moves past it.
        const decoded = this.deserialize(state, raw);
        if (decoded instanceof Undeserializable) {
          if (last !== undefined) state.nextOffset = offsetAfter(last);
          last = undefined;
          await this.onDeserializationError(decoded.context, raw, decoded.error);
          state.nextOffset = offsetAfter(offset);
          continue;
        }
        last = offset;
        records.push(decoded);
        timestamps.push(raw.timestamp);
      }
      if (last !== undefined) state.nextOffset = offsetAfter(last);
      last = undefined;
      if (chunk.index < chunk.records.length) break;
      state.chunks.shift();
      freed += chunk.bytes;
      if (chunk.nextOffset > state.nextOffset) state.nextOffset = chunk.nextOffset;
    }
    if (state.stoppingOffset !== undefined && state.nextOffset >= state.stoppingOffset) {
      state.nextOffset = state.stoppingOffset;
      for (const chunk of state.chunks.splice(0)) freed += chunk.bytes;
    }
    if (freed > 0) {
      this.bufferedBytes -= freed;
      this.wake();
    }
    this.lag.report(state.split.splitId, state.nextOffset, state.stoppingOffset);
    if (records.length === 0) return undefined;
    return { splitId: state.split.splitId, records, timestamps };
  }

  /** The record, or what went wrong for {@link onDeserializationError} to handle. */
  private deserialize(state: PartitionState, raw: RawRecord): KafkaRecord<K, V, H> | Undeserializable {
    const offset = String(raw.offset);
    // A fresh context per record where a deserializer may read (and keep) it; the built-in ones
    // never do, so they get the partition's (its offset unset) and a failure gets its own below.
    const context: DeserializationContext = this.needsContext
      ? { topic: state.topic, partition: state.partition, offset }
      : state.context;
    try {
      const headers: Record<string, H | null | Array<H | null>> = {};
      if (raw.headers !== NO_HEADERS) this.deserializeHeaders(raw.headers, context, headers);
      const { key, value } = this.config;
      return {
        topic: state.topic,
        partition: state.partition,
        offset,
        timestamp: raw.timestamp,
        key: raw.key === null ? null : key.deserialize(raw.key, context),
        value: raw.value === null ? null : value.deserialize(raw.value, context),
        headers,
      };
    } catch (error) {
      return new Undeserializable(
        this.needsContext ? context : { topic: state.topic, partition: state.partition, offset },
        error,
      );
    }
  }

  /** Deserializes `raw` headers into `headers` (a throw is the record's deserialization error). */
  private deserializeHeaders(
    raw: RawRecord["headers"],
    context: DeserializationContext,
    headers: Record<string, H | null | Array<H | null>>,
  ): void {
    const header = (bytes: Buffer | null): H | null =>
      bytes === null ? null : this.config.headers.deserialize(bytes, context);
    for (const [name, value] of Object.entries(raw)) {
      if (value === undefined) continue;
      const decoded = Array.isArray(value) ? value.map(header) : header(value);
      // An assignment to `__proto__` would set the prototype instead of a header.
      if (name === "__proto__") {
        Object.defineProperty(headers, name, {
          value: decoded,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else {
        headers[name] = decoded;
      }
    }
  }

  private async onDeserializationError(
    context: DeserializationContext,
    raw: RawRecord,
    error: unknown,
  ): Promise<undefined> {
    const reason = error instanceof Error ? error.message : String(error);
    const where = `topic '${context.topic}' partition ${context.partition} offset ${context.offset}`;
    const policy = this.config.onDeserializationError;
    if (policy === "fail") {
      throw new DeserializationError(
        `cannot deserialize the record at ${where}: ${reason}. Fix the producer, or set onDeserializationError to "skip" or { deadLetterTopic } to go on without it.`,
        {
          cause: error,
          details: {
            ...context,
            splitId: splitIdOf(context.topic, context.partition),
            position: context.offset,
          },
        },
      );
    }
    if (policy === "skip") {
      this.logger.warn({ ...context, error: reason }, "skipped a record that cannot be deserialized");
      this.skipped.inc(1, this.labels);
      return undefined;
    }
    // Awaited before the position moves past the record, so a checkpoint never skips an unwritten one.
    this.deadLetterProducer ??= await this.connectDeadLetterProducer();
    // kafkajs writes a null header value as Kafka's null (length -1), though its typings omit null.
    const headers = {} as Record<string, Buffer | Buffer[] | string>;
    for (const [name, value] of Object.entries(raw.headers)) {
      if (value !== undefined) headers[name] = value as Buffer | Buffer[];
    }
    await this.deadLetterProducer.send({
      topic: policy.deadLetterTopic,
      messages: [
        {
          key: raw.key,
          value: raw.value,
          timestamp: String(raw.timestamp),
          headers: {
            ...headers,
            "onceflow.error": reason,
            "onceflow.topic": context.topic,
            "onceflow.partition": String(context.partition),
            "onceflow.offset": context.offset,
          },
        },
      ],
    });
    this.deadLettered.inc(1, this.labels);
    return undefined;
  }

  private async connectDeadLetterProducer(): Promise<Producer> {
    const producer = this.config.kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    return producer;
  }

  isAvailable(): Promise<void> {
    if (this.hasData() || this.failure !== undefined || this.closed || this.isFinished())
      return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.wakeReaders;
      this.wakeReaders = () => {
        previous?.();
        resolve();
      };
    });
  }

  private hasData(): boolean {
    for (const state of this.partitions.values()) if (state.chunks.length > 0) return true;
    return false;
  }

  isFinished(): boolean {
    if (this.config.stoppingOffsets === undefined) return false;
    for (const state of this.partitions.values()) {
      if (state.stoppingOffset === undefined || state.nextOffset < state.stoppingOffset) return false;
    }
    return true;
  }

  snapshotState(checkpointId: number): KafkaPartitionSplit[] {
    this.checkpointingSeen = true;
    const splits: KafkaPartitionSplit[] = [];
    const offsets: Array<{ topic: string; partition: number; offset: bigint }> = [];
    for (const state of this.partitions.values()) {
      splits.push({
        splitId: state.split.splitId,
        topic: state.topic,
        partition: state.partition,
        nextOffset: state.nextOffset.toString(),
        ...(state.stoppingOffset === undefined ? {} : { stoppingOffset: state.stoppingOffset.toString() }),
      });
      offsets.push({ topic: state.topic, partition: state.partition, offset: state.nextOffset });
    }
    if (this.config.commitOffsetsOnCheckpoint && this.config.groupId !== undefined) {
      this.pendingCommits.set(checkpointId, offsets);
    }
    return splits;
  }

  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    const offsets = this.pendingCommits.get(checkpointId);
    // A completed checkpoint subsumes the ones before it.
    for (const id of [...this.pendingCommits.keys()]) if (id <= checkpointId) this.pendingCommits.delete(id);
    if (offsets === undefined || this.config.groupId === undefined) return;
    try {
      await this.connection.commitGroupOffsets(this.config.groupId, offsets);
    } catch (error) {
      // Committed offsets are for monitoring only; the checkpoint holds the real position.
      this.logger.warn(
        { checkpointId, groupId: this.config.groupId, error: (error as Error).message },
        "could not commit offsets to the consumer group",
      );
    }
  }

  notifyCheckpointAborted(checkpointId: number): void {
    this.pendingCommits.delete(checkpointId);
  }

  /** Commits the handed-out positions (auto-commit); `final` is the last one, at close. */
  private async autoCommitNow(final = false): Promise<void> {
    if (this.checkpointingSeen || this.config.groupId === undefined || (this.closed && !final)) return;
    const offsets = [...this.partitions.values()].map((s) => ({
      topic: s.topic,
      partition: s.partition,
      offset: s.nextOffset,
    }));
    const fingerprint = offsets.map((o) => `${o.topic}:${o.partition}:${o.offset}`).join(",");
    if (offsets.length === 0 || fingerprint === this.lastAutoCommitted) return;
    try {
      await this.connection.commitGroupOffsets(this.config.groupId, offsets);
      this.lastAutoCommitted = fingerprint;
    } catch (error) {
      this.logger.warn({ error: (error as Error).message }, "auto-commit of offsets failed");
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.autoCommitTimer !== undefined) clearInterval(this.autoCommitTimer);
    this.wake();
    await this.loop;
    if (this.connected !== undefined) {
      await this.connected.catch(() => undefined);
      if (this.config.autoCommit) await this.autoCommitNow(true);
      await Promise.allSettled([
        this.connection.disconnect(),
        this.admin.disconnect(),
        this.deadLetterProducer?.disconnect(),
      ]);
    }
  }

  private wake(): void {
    const loop = this.wakeLoop;
    this.wakeLoop = undefined;
    loop?.();
    if (this.hasData() || this.failure !== undefined || this.closed || this.isFinished()) {
      const readers = this.wakeReaders;
      this.wakeReaders = undefined;
      readers?.();
    }
  }

  /** Keeps one Fetch in flight per leader broker while the buffer has room. */
  private async fetchLoop(): Promise<void> {
    let refreshMetadata = false;
    let retryDelay = RETRY_MIN_MS;
    const running = new Set<Promise<void>>();
    while (!this.closed && this.failure === undefined) {
      const wanted = [...this.partitions.values()].filter(
        (s) => !s.inFlight && (s.stoppingOffset === undefined || s.fetchOffset < s.stoppingOffset),
      );
      const woken = new Promise<void>((resolve) => {
        this.wakeLoop = resolve;
      });
      if (wanted.length > 0 && this.bufferedBytes < this.config.maxPrefetchBytes) {
        try {
          const leaderOf = await this.connection.leaders(
            [...new Set(wanted.map((s) => s.topic))],
            refreshMetadata,
          );
          refreshMetadata = false;
          const byLeader = new Map<number, PartitionState[]>();
          let placed = 0;
          for (const [topic, states] of groupBy(wanted, (s) => s.topic)) {
            for (const [leader, partitions] of leaderOf(
              topic,
              states.map((s) => s.partition),
            )) {
              if (leader < 0) continue;
              const list = byLeader.get(leader) ?? [];
              for (const s of states) {
                if (!partitions.includes(s.partition)) continue;
                list.push(s);
                placed++;
              }
              byLeader.set(leader, list);
            }
          }
          if (placed < wanted.length) {
            // A partition without a known leader (new partition, leader election): look again soon.
            refreshMetadata = true;
            setTimeout(() => this.wake(), RETRY_MAX_MS / 10).unref();
          }
          for (const [leader, states] of byLeader) {
            if (this.inFlightLeaders.has(leader)) continue;
            this.inFlightLeaders.add(leader);
            for (const s of states) s.inFlight = true;
            const request = this.fetchFrom(leader, states)
              .then(() => {
                retryDelay = RETRY_MIN_MS;
              })
              .catch(async (error: unknown) => {
                if (!(await this.recoverFromFetchError(error))) return;
                refreshMetadata = true;
                await sleep(retryDelay);
                retryDelay = Math.min(retryDelay * 2, RETRY_MAX_MS);
              })
              .finally(() => {
                this.inFlightLeaders.delete(leader);
                for (const s of states) s.inFlight = false;
                running.delete(request);
                this.wake();
              });
            running.add(request);
          }
        } catch (error) {
          if (!(await this.recoverFromFetchError(error))) break;
          refreshMetadata = true;
          await sleep(retryDelay);
          retryDelay = Math.min(retryDelay * 2, RETRY_MAX_MS);
          continue;
        }
      }
      await woken;
    }
    await Promise.allSettled([...running]);
  }

  private async fetchFrom(leader: number, states: PartitionState[]): Promise<void> {
    const results = await this.connection.fetch(leader, {
      readCommitted: this.config.readCommitted,
      maxWaitTime: this.config.fetchMaxWaitMs,
      maxBytes: Math.max(this.config.maxPrefetchBytes - this.bufferedBytes, this.config.maxBytesPerPartition),
      maxBytesPerPartition: this.config.maxBytesPerPartition,
      partitions: states.map((s) => ({ topic: s.topic, partition: s.partition, fetchOffset: s.fetchOffset })),
    });
    for (const result of results) this.append(result);
  }

  private append(result: FetchedPartition): void {
    const state = this.partitions.get(splitIdOf(result.topic, result.partition));
    if (state === undefined) return;
    this.lag.fetched(state.split.splitId, result.highWatermark, result.lastStableOffset);
    // Nothing buffered for it: the lag moves with the end offset alone.
    if (state.chunks.length === 0)
      this.lag.report(state.split.splitId, state.nextOffset, state.stoppingOffset);
    if (result.nextOffset <= state.fetchOffset) return;
    let bytes = 0;
    for (const r of result.records) bytes += (r.key?.length ?? 0) + (r.value?.length ?? 0) + 64;
    state.chunks.push({ records: result.records, index: 0, nextOffset: result.nextOffset, bytes });
    state.fetchOffset = result.nextOffset;
    this.bufferedBytes += bytes;
  }

  /** Handles a failed Fetch; returns false when the reader must fail. */
  private async recoverFromFetchError(error: unknown): Promise<boolean> {
    if (this.closed) return false;
    const outOfRange = offsetOutOfRange(error);
    if (outOfRange !== undefined) {
      const state = this.partitions.get(splitIdOf(outOfRange.topic, outOfRange.partition));
      if (state !== undefined) {
        const strategy = this.outOfRangeStrategy();
        const offsets = await this.resolver.reset([state], strategy).catch(() => new Map<string, bigint>());
        const offset = offsets.get(offsetKey(state.topic, state.partition));
        if (offset !== undefined) {
          this.logger.warn(
            {
              topic: state.topic,
              partition: state.partition,
              from: String(state.fetchOffset),
              to: String(offset),
            },
            `offset out of range (deleted by retention?): resetting to ${strategy}`,
          );
          // An empty chunk moves the handed-out position too, in order, after what is buffered.
          state.chunks.push({ records: [], index: 0, nextOffset: offset, bytes: 0 });
          state.fetchOffset = offset;
        }
      }
      return true;
    }
    const retriable = (error as { retriable?: unknown })?.retriable;
    if (retriable === false) {
      this.failure = error;
      this.wake();
      return false;
    }
    this.logger.warn({ error: (error as Error)?.message }, "kafka fetch failed, retrying");
    return true;
  }

  private outOfRangeStrategy(): OffsetResetStrategy {
    const start = this.config.startingOffsets;
    if (start === "latest") return "latest";
    if (typeof start === "object" && "committed" in start) return start.committed;
    if (typeof start === "object" && "specific" in start) return start.reset ?? "earliest";
    return "earliest";
  }
}

function groupBy<T, K>(items: readonly T[], keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = groups.get(key) ?? [];
    list.push(item);
    groups.set(key, list);
  }
  return groups;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
