// The fetch scheduling of a `KafkaSourceReader`: one Fetch in flight per leader broker while the
// prefetch buffer (bounded by `maxPrefetchBytes`) has room, the fetched chunks appended to each
// partition's buffer, and recovery from failed fetches (offset out of range, retries with backoff).
import type { Logger } from "@onceflow/core";
import {
  type FetchedPartition,
  type KafkaConnection,
  offsetOutOfRange,
  RecordColumns,
} from "../internal/kafkajs/internals.js";
import { splitIdOf } from "./kafka-partition-split.js";
import type { OffsetResetStrategy, StartingOffsets } from "./kafka-source-options.js";
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
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5000;

/** Fills the buffers of a reader's partitions with Fetch requests of its own. */
export class Prefetcher {
  private bufferedBytes = 0;
  private wakeLoop: (() => void) | undefined;
  private readonly inFlightLeaders = new Set<number>();

  constructor(
    private readonly config: PrefetcherConfig,
    private readonly connection: KafkaConnection,
    private readonly resolver: OffsetsResolver,
    private readonly lag: PartitionLag,
    private readonly logger: Logger,
    private readonly partitions: ReadonlyMap<string, PartitionState>,
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
    let refreshMetadata = false;
    let retryDelay = RETRY_MIN_MS;
    const running = new Set<Promise<void>>();
    while (!this.host.isClosed() && !this.host.hasFailed()) {
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
            setTimeout(() => this.host.wake(), RETRY_MAX_MS / 10).unref();
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
                this.host.wake();
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
    this.bufferedBytes += bytes;
  }

  /** Handles a failed Fetch; returns false when the reader must fail. */
  private async recoverFromFetchError(error: unknown): Promise<boolean> {
    if (this.host.isClosed()) return false;
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
          state.chunks.push({ records: RecordColumns.acquire(), index: 0, nextOffset: offset, bytes: 0 });
          state.fetchOffset = offset;
        }
      }
      return true;
    }
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
