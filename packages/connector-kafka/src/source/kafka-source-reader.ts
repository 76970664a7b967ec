import type { Logger, SourceBatch, SourceReader, SourceReaderContext } from "@onceflow/core";
import type { Admin, Kafka } from "kafkajs";
import { KafkaConnection, offsetAfter, type RawOffset } from "../internal/kafkajs/internals.js";
import type { Deserializer } from "./deserializer.js";
import type { KafkaPartitionSplit } from "./kafka-partition-split.js";
import type { KafkaRecord } from "./kafka-record.js";
import type { DeserializationErrorPolicy, StartingOffsets, StoppingOffsets } from "./kafka-source-options.js";
import { type MissingPartitionPolicy, MissingPartitions } from "./missing-partitions.js";
import { OffsetsResolver, offsetKey } from "./offsets-resolver.js";
import { PartitionLag } from "./partition-lag.js";
import type { PartitionState } from "./partition-state.js";
import { Prefetcher } from "./prefetcher.js";
import { RecordDecoder, Undeserializable } from "./record-decoder.js";

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
  readonly onMissingPartition: MissingPartitionPolicy;
}

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
  private readonly decoder: RecordDecoder<K, V, H>;
  private readonly prefetcher: Prefetcher;
  private readonly lag: PartitionLag;
  private connected: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;
  private failure: unknown;
  private restored = false;
  private roundRobin = 0;
  private wakeReaders: (() => void) | undefined;
  private readonly pendingCommits = new Map<
    number,
    Array<{ topic: string; partition: number; offset: bigint }>
  >();
  private checkpointingSeen = false;
  private autoCommitTimer: NodeJS.Timeout | undefined;
  private lastAutoCommitted = "";

  /** @internal Readers come from {@link KafkaSource.createReader}. */
  constructor(
    private readonly config: KafkaSourceReaderConfig<K, V, H>,
    context: SourceReaderContext,
  ) {
    this.connection = new KafkaConnection(config.kafka, { readCommitted: config.readCommitted });
    this.admin = config.kafka.admin();
    this.resolver = new OffsetsResolver(this.admin, config.groupId);
    this.logger = context.logger.child({ source: "kafka", subtask: context.subtaskIndex });
    this.decoder = new RecordDecoder(config, context, this.logger);
    this.lag = new PartitionLag(context, config.readCommitted);
    this.prefetcher = new Prefetcher(
      config,
      this.connection,
      this.resolver,
      this.lag,
      this.logger,
      this.partitions,
      new MissingPartitions(config.onMissingPartition, context, this.logger),
      {
        isClosed: () => this.closed,
        hasFailed: () => this.failure !== undefined,
        fail: (error) => {
          this.failure = error;
          this.wake();
        },
        wake: () => this.wake(),
        drop: (state) => {
          this.partitions.delete(state.split.splitId);
          this.wake();
        },
      },
    );
    // When the runtime says checkpointing is on, auto-commit never starts (Flink ignores
    // enable.auto.commit with checkpointing too); otherwise the first checkpoint stops it.
    if (context.checkpointingInterval !== undefined) this.checkpointingSeen = true;
    this.restored = context.isRestored;
  }

  private ensureConnected(): Promise<void> {
    this.connected ??= (async () => {
      await Promise.all([this.connection.connect(), this.admin.connect()]);
      this.loop = this.prefetcher.fetchLoop();
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
      const fetched = chunk.records;
      while (chunk.index < fetched.length && records.length < maxBatchSize) {
        const offset = fetched.offsetAt(chunk.index);
        if (
          typeof offset === "number"
            ? offset >= stopNumber
            : stoppingOffset !== undefined && offset >= stoppingOffset
        ) {
          chunk.index = fetched.length;
          break;
        }
        // Made now, from the columns: it dies young once deserialized (see RecordColumns).
        const raw = fetched.recordAt(chunk.index);
        chunk.index++;
        // Synchronous on the happy path: an `await` per record was a promise and a microtask hop
        // each. Only a record that cannot be deserialized waits (for its policy, perhaps the dead
        // letter topic), still before the position moves past it.
        const decoded = this.decoder.deserialize(state, raw);
        if (decoded instanceof Undeserializable) {
          if (last !== undefined) state.nextOffset = offsetAfter(last);
          last = undefined;
          await this.decoder.onDeserializationError(decoded.context, raw, decoded.error);
          state.nextOffset = offsetAfter(offset);
          continue;
        }
        last = offset;
        records.push(decoded);
        timestamps.push(raw.timestamp);
      }
      if (last !== undefined) state.nextOffset = offsetAfter(last);
      last = undefined;
      if (chunk.index < fetched.length) break;
      state.chunks.shift();
      fetched.release();
      freed += chunk.bytes;
      if (chunk.nextOffset > state.nextOffset) state.nextOffset = chunk.nextOffset;
    }
    if (state.stoppingOffset !== undefined && state.nextOffset >= state.stoppingOffset) {
      state.nextOffset = state.stoppingOffset;
      for (const chunk of state.chunks.splice(0)) {
        freed += chunk.bytes;
        chunk.records.release();
      }
    }
    if (freed > 0) {
      this.prefetcher.release(freed);
      this.wake();
    }
    this.lag.report(state.split.splitId, state.nextOffset, state.stoppingOffset);
    if (records.length === 0) return undefined;
    return { splitId: state.split.splitId, records, timestamps };
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
        this.decoder.disconnect(),
      ]);
    }
  }

  private wake(): void {
    this.prefetcher.wake();
    if (this.hasData() || this.failure !== undefined || this.closed || this.isFinished()) {
      const readers = this.wakeReaders;
      this.wakeReaders = undefined;
      readers?.();
    }
  }
}
