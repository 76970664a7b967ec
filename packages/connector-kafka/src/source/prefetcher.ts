// The fetch scheduling of a `KafkaSourceReader`: one Fetch in flight per leader broker while the
// prefetch buffer (bounded by `maxPrefetchBytes`) has room, the fetched chunks appended to each
// partition's buffer, and recovery from failed fetches, per partition (offset out of range, not the
// leader, deleted topic) or whole (broker unreachable), retried with backoff.
import { type Logger, OnceflowError } from "@onceflow/core";
import {
  type FetchedPartition,
  type KafkaConnection,
  type KafkaProtocolError,
  RecordColumns,
} from "../internal/kafkajs/internals.js";
import { splitIdOf } from "./kafka-partition-split.js";
import type { OffsetResetStrategy, StartingOffsets } from "./kafka-source-options.js";
import type { MissingPartitions } from "./missing-partitions.js";
import { type OffsetsResolver, offsetKey } from "./offsets-resolver.js";
import type { PartitionLag } from "./partition-lag.js";
import type { PartitionState } from "./partition-state.js";

/** The reader settings a {@link Prefetcher} uses. */
export interface PrefetcherConfig {
  readonly startingOffsets: StartingOffsets;
  readonly readCommitted: boolean;
  readonly maxPrefetchBytes: number;
  readonly fetchMaxWaitMs: number;
  readonly maxBytesPerPartition: number;
}

/** What a {@link Prefetcher} needs of its reader: whether it still runs, and how to fail or wake it. */
export interface PrefetcherHost {
  /** Whether the reader is closed. */
  isClosed(): boolean;
  /** Whether the reader has failed. */
  hasFailed(): boolean;
  /** Fails the reader with `error` (a Fetch error that is not retriable). */
  fail(error: unknown): void;
  /** Wakes the reader: the fetch loop, and the callers waiting for data. */
  wake(): void;
  /** Forgets a partition whose topic was deleted (policy `"drop"`). */
  drop(state: PartitionState): void;
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5000;

/** Fills the buffers of a reader's partitions with Fetch requests of its own. */
export class Prefetcher {
  private bufferedBytes = 0;
  private wakeLoop: (() => void) | undefined;
  private readonly inFlightLeaders = new Set<number>();
  /** Set by a failure that stale metadata may explain: the next lookup reloads it. */
  private refreshMetadata = false;

  constructor(
    private readonly config: PrefetcherConfig,
    private readonly connection: KafkaConnection,
    private readonly resolver: OffsetsResolver,
    private readonly lag: PartitionLag,
    private readonly logger: Logger,
    private readonly partitions: ReadonlyMap<string, PartitionState>,
    private readonly missing: MissingPartitions,
    private readonly host: PrefetcherHost,
  ) {}

  /** Takes `bytes` handed out (or dropped) off the buffer. */
  release(bytes: number): void {
    this.bufferedBytes -= bytes;
  }

  /** Wakes the fetch loop, to look again at what to fetch. */
  wake(): void {
    const loop = this.wakeLoop;
    this.wakeLoop = undefined;
    loop?.();
  }

  /** Keeps one Fetch in flight per leader broker while the buffer has room. */
  async fetchLoop(): Promise<void> {
    let retryDelay = RETRY_MIN_MS;
    const running = new Set<Promise<void>>();
    while (!this.host.isClosed() && !this.host.hasFailed()) {
      const now = Date.now();
      const wanted = [...this.partitions.values()].filter(
        (s) =>
          !s.inFlight &&
          (s.retryAt === undefined || s.retryAt <= now) &&
          (s.stoppingOffset === undefined || s.fetchOffset < s.stoppingOffset),
      );
      const woken = new Promise<void>((resolve) => {
        this.wakeLoop = resolve;
      });
      if (wanted.length > 0 && this.bufferedBytes < this.config.maxPrefetchBytes) {
        try {
          const leaderOf = await this.connection.leaders(
            [...new Set(wanted.map((s) => s.topic))],
            this.refreshMetadata,
          );
          this.refreshMetadata = false;
          const byLeader = new Map<number, PartitionState[]>();
          for (const s of wanted) {
            const leader = leaderOf(s.topic, s.partition);
            if (leader === undefined) {
              this.onMissing(s, now);
              continue;
            }
            this.missing.found(s);
            if (leader < 0) {
              // No leader yet (an election, a new partition): look again soon.
              this.retryLater(s, now);
              continue;
            }
            const list = byLeader.get(leader) ?? [];
            list.push(s);
            byLeader.set(leader, list);
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
                if (!this.recoverFromFetchError(error)) return;
                this.refreshMetadata = true;
                await sleep(retryDelay);
                retryDelay = Math.min(retryDelay * 2, RETRY_MAX_MS);
              })
              .finally(() => {
                this.inFlightLeaders.delete(leader);
                for (const s of states) s.inFlight = false;
                running.delete(request);
                this.host.wake();
              });
            running.add(request);
          }
        } catch (error) {
          if (!this.recoverFromFetchError(error)) break;
          this.refreshMetadata = true;
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
    const { fetched, failed } = await this.connection.fetch(leader, {
      readCommitted: this.config.readCommitted,
      maxWaitTime: this.config.fetchMaxWaitMs,
      maxBytes: Math.max(this.config.maxPrefetchBytes - this.bufferedBytes, this.config.maxBytesPerPartition),
      maxBytesPerPartition: this.config.maxBytesPerPartition,
      partitions: states.map((s) => ({ topic: s.topic, partition: s.partition, fetchOffset: s.fetchOffset })),
    });
    for (const result of fetched) this.append(result);
    for (const { topic, partition, error } of failed) {
      const state = this.partitions.get(splitIdOf(topic, partition));
      if (state !== undefined) await this.recoverPartition(state, error);
    }
  }

  private append(result: FetchedPartition): void {
    const state = this.partitions.get(splitIdOf(result.topic, result.partition));
    if (state === undefined) {
      result.records.release();
      return;
    }
    this.lag.fetched(state.split.splitId, result.highWatermark, result.lastStableOffset);
    // Nothing buffered for it: the lag moves with the end offset alone.
    if (state.chunks.length === 0)
      this.lag.report(state.split.splitId, state.nextOffset, state.stoppingOffset);
    if (result.nextOffset <= state.fetchOffset) {
      result.records.release();
      return;
    }
    // Key and value bytes (a null one counts 0) plus a record's own overhead.
    const bytes = result.records.payloadBytes + 64 * result.records.length;
    state.chunks.push({ records: result.records, index: 0, nextOffset: result.nextOffset, bytes });
    state.fetchOffset = result.nextOffset;
    state.retryDelay = undefined;
    this.bufferedBytes += bytes;
  }

  /** Handles a partition's error in a Fetch response: the other partitions are not held back. */
  private async recoverPartition(state: PartitionState, error: KafkaProtocolError): Promise<void> {
    if (error.type === "OFFSET_OUT_OF_RANGE") {
      await this.resetOutOfRange(state);
      return;
    }
    if (!error.retriable) {
      // Typed with a permanent code: fetching again cannot succeed (a missing ACL, corrupt data),
      // so the job stops at once instead of restarting forever.
      const corrupt = error.type === "CORRUPT_MESSAGE" || error.type === "INVALID_RECORD";
      const failure = new OnceflowError(
        corrupt ? "RECORD_REJECTED" : "CONFIGURATION",
        `Fetch from ${state.topic} partition ${state.partition} at offset ${state.fetchOffset} failed for good: ` +
          `${error.type} (${error.message}); ${
            corrupt
              ? "the broker holds data it cannot serve: start past it (startingOffsets: { specific }) or repair the partition"
              : "fix the cause the broker names (for example the consumer's ACLs on the topic), then restart"
          }`,
        {
          cause: error,
          details: {
            topic: state.topic,
            partition: state.partition,
            offset: String(state.fetchOffset),
            brokerError: error.type,
          },
        },
      );
      this.host.fail(Object.assign(failure, { type: error.type, retriable: false as const }));
      return;
    }
    // Not the leader, deleted topic (UNKNOWN_TOPIC_OR_PARTITION) …: the metadata says which.
    this.logger.debug(
      { topic: state.topic, partition: state.partition, error: error.type },
      "kafka fetch of a partition failed, retrying",
    );
    this.refreshMetadata = true;
    this.retryLater(state, Date.now());
  }

  private async resetOutOfRange(state: PartitionState): Promise<void> {
    const strategy = this.outOfRangeStrategy();
    const offsets = await this.resolver.reset([state], strategy).catch(() => new Map<string, bigint>());
    const offset = offsets.get(offsetKey(state.topic, state.partition));
    if (offset === undefined) {
      this.retryLater(state, Date.now());
      return;
    }
    this.logger.warn(
      { topic: state.topic, partition: state.partition, from: String(state.fetchOffset), to: String(offset) },
      `offset out of range (deleted by retention?): resetting to ${strategy}`,
    );
    // An empty chunk moves the handed-out position too, in order, after what is buffered.
    state.chunks.push({ records: RecordColumns.acquire(), index: 0, nextOffset: offset, bytes: 0 });
    state.fetchOffset = offset;
  }

  /** A partition the cluster's metadata does not have: waited for, or dropped, per the policy. */
  private onMissing(state: PartitionState, now: number): void {
    if (this.missing.missing(state, now)) {
      this.missing.drop(state);
      this.host.drop(state);
      return;
    }
    this.refreshMetadata = true;
    this.retryLater(state, now);
  }

  /** Leaves `state` out of the Fetch requests for a while (doubling up to 5 s), then wakes the loop. */
  private retryLater(state: PartitionState, now: number): void {
    const delay = Math.min((state.retryDelay ?? RETRY_MIN_MS / 2) * 2, RETRY_MAX_MS);
    state.retryDelay = delay;
    state.retryAt = now + delay;
    setTimeout(() => this.host.wake(), delay).unref();
  }

  /** Handles a failed Fetch or metadata lookup (the whole request); returns false when the reader must fail. */
  private recoverFromFetchError(error: unknown): boolean {
    if (this.host.isClosed()) return false;
    const retriable = (error as { retriable?: unknown })?.retriable;
    if (retriable === false) {
      this.host.fail(error);
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
