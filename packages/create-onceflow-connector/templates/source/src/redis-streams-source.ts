import {
  ConfigurationError,
  type Source,
  type SourceBatch,
  type SourceReader,
  type SourceReaderContext,
  type SourceSplit,
} from "@onceflow/core";
import { createClient, type RedisClientType } from "redis";

/**
 * A node-redis client, as {@link RedisStreamsSourceOptions.createClient} returns it (not connected yet).
 *
 * @example
 * ```ts
 * const client: RedisClient = createClient({ url: "redis://127.0.0.1:6379" });
 * ```
 */
export type RedisClient = RedisClientType;

/**
 * One split of a {@link RedisStreamsSource}: one stream key, and the id of the last entry handed
 * out — the whole position, stored in checkpoints. A restore reads on after it with XRANGE.
 *
 * @example
 * ```ts
 * const split: RedisStreamSplit = { splitId: "orders", stream: "orders", lastId: "1700000000000-0" };
 * ```
 */
export interface RedisStreamSplit extends SourceSplit {
  readonly stream: string;
  /** The id of the last entry handed out; `0-0` before the first. */
  readonly lastId: string;
  /** A bounded source's last entry to read, fixed when the split is first read (`0-0`: the stream was empty). */
  readonly endId?: string;
}

/**
 * Settings of a {@link RedisStreamsSource}.
 *
 * @example
 * ```ts
 * const options: RedisStreamsSourceOptions<Order> = {
 *   url: "redis://127.0.0.1:6379",
 *   streams: ["orders-0", "orders-1"],
 *   deserialize: (fields) => JSON.parse(fields.value ?? "null") as Order,
 * };
 * ```
 */
export interface RedisStreamsSourceOptions<T> {
  /** The Redis server, e.g. `redis://127.0.0.1:6379`. */
  readonly url: string;
  /** The stream keys to read, one split each (the unit of parallelism). */
  readonly streams: readonly string[];
  /** Makes a record of an entry's fields (default: the `value` field, JSON-parsed). */
  readonly deserialize?: (fields: Readonly<Record<string, string>>, id: string) => T;
  /** Stop at the last entry each stream has when it is first read: a bounded source (default false). */
  readonly bounded?: boolean;
  /** Most entries per XRANGE, and so per batch (default 500). */
  readonly batchSize?: number;
  /** How long to wait before looking again when every stream was read to its end, in ms (default 100). */
  readonly pollIntervalMs?: number;
  /** Makes the client (TLS, credentials, a test's own); default `createClient({ url })`. Not connected yet. */
  readonly createClient?: (url: string) => RedisClient;
  /** Shown in logs (default `RedisStreamsSource`). */
  readonly name?: string;
}

/**
 * A replayable source over Redis Streams: one split per stream, read with XRANGE from the last
 * entry handed out — no consumer groups, nothing acknowledged, so Redis keeps no state for the job
 * and the checkpoint alone says where to go on. After a failure the job restores its checkpoint
 * and reads each stream again after the id stored there: with an exactly-once sink, every entry
 * reaches the output once. Entries trimmed (XTRIM, MAXLEN) before the job read them are gone.
 *
 * @example
 * ```ts
 * const source = new RedisStreamsSource<Order>({ url: "redis://127.0.0.1:6379", streams: ["orders"] });
 * job.fromSource(source, { uid: "orders" }).sinkTo(sink);
 * ```
 */
export class RedisStreamsSource<T> implements Source<T, RedisStreamSplit> {
  readonly name: string;
  readonly boundedness: "bounded" | "continuous";

  constructor(private readonly options: RedisStreamsSourceOptions<T>) {
    if (options.streams.length === 0 || new Set(options.streams).size !== options.streams.length) {
      throw new ConfigurationError("streams", "give one or more stream keys, each once");
    }
    const batchSize = options.batchSize ?? 500;
    if (!(Number.isInteger(batchSize) && batchSize >= 1)) {
      throw new ConfigurationError("batchSize", `must be a whole number of at least 1, got ${batchSize}`);
    }
    this.name = options.name ?? "RedisStreamsSource";
    this.boundedness = options.bounded === true ? "bounded" : "continuous";
  }

  /** Lists one split per stream, at its start. */
  async discoverSplits(): Promise<RedisStreamSplit[]> {
    return this.options.streams.map((stream) => ({ splitId: stream, stream, lastId: "0-0" }));
  }

  /** Stream `i` of the list goes to subtask `i % parallelism`. */
  assignSplit(split: RedisStreamSplit, parallelism: number): number {
    return Math.max(0, this.options.streams.indexOf(split.stream)) % parallelism;
  }

  createReader(_context: SourceReaderContext): RedisStreamsReader<T> {
    return new RedisStreamsReader(this.options);
  }
}

interface ReadingSplit {
  readonly splitId: string;
  readonly stream: string;
  lastId: string;
  endId: string | undefined;
}

const defaultDeserialize = (fields: Readonly<Record<string, string>>) => JSON.parse(fields.value ?? "null");

/**
 * Reads the streams assigned to one subtask, in turn, one XRANGE each poll. A batch is exactly what
 * one XRANGE returned, so the position `snapshotState` stores is the last entry handed out.
 *
 * @example
 * ```ts
 * const reader = new RedisStreamsReader<string>({ url, streams: ["orders"] });
 * await reader.addSplits([{ splitId: "orders", stream: "orders", lastId: "0-0" }]);
 * const batch = await reader.pollNext();
 * ```
 */
export class RedisStreamsReader<T> implements SourceReader<T, RedisStreamSplit> {
  private readonly splits: ReadingSplit[] = [];
  private readonly client: RedisClient;
  private readonly deserialize: (fields: Readonly<Record<string, string>>, id: string) => T;
  private readonly bounded: boolean;
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private connected: Promise<unknown> | undefined;
  private cursor = 0;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private waiting: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(options: RedisStreamsSourceOptions<T>) {
    this.client = (options.createClient ?? ((url) => createClient({ url }) as RedisClient))(options.url);
    this.deserialize = (options.deserialize ?? defaultDeserialize) as typeof this.deserialize;
    this.bounded = options.bounded === true;
    this.batchSize = options.batchSize ?? 500;
    this.pollIntervalMs = options.pollIntervalMs ?? 100;
  }

  async addSplits(splits: RedisStreamSplit[]): Promise<void> {
    for (const split of splits) {
      let endId = split.endId;
      if (this.bounded && endId === undefined) {
        // Fixed once, then kept in the split: a restore ends where the first start would have.
        const last = await (await this.connect()).xRevRange(split.stream, "+", "-", { COUNT: 1 });
        endId = last?.[0]?.id ?? "0-0";
      }
      this.splits.push({ splitId: split.splitId, stream: split.stream, lastId: split.lastId, endId });
    }
  }

  async pollNext(): Promise<SourceBatch<T> | undefined> {
    for (let tried = 0; tried < this.splits.length && !this.closed; tried++) {
      const split = this.splits[this.cursor];
      this.cursor = (this.cursor + 1) % this.splits.length;
      if (split === undefined || this.splitFinished(split)) continue;
      // "(" makes the start exclusive: the entries after the last one handed out.
      const entries = await (await this.connect()).xRange(
        split.stream,
        `(${split.lastId}`,
        split.endId ?? "+",
        { COUNT: this.batchSize },
      );
      if (entries === null || entries.length === 0) continue;
      const records = entries.map((entry) => this.deserialize(entry.message, entry.id));
      split.lastId = entries[entries.length - 1]!.id;
      return { splitId: split.splitId, records };
    }
    return undefined;
  }

  /** Resolves at once when a bounded reader finished, else after the poll interval (or at close). */
  isAvailable(): Promise<void> {
    if (this.closed || this.isFinished()) return Promise.resolve();
    this.waiting ??= new Promise<void>((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.signal(), this.pollIntervalMs);
    });
    return this.waiting;
  }

  isFinished(): boolean {
    return this.bounded && this.splits.every((split) => this.splitFinished(split));
  }

  snapshotState(_checkpointId: number): RedisStreamSplit[] {
    return this.splits.map(({ splitId, stream, lastId, endId }) => ({
      splitId,
      stream,
      lastId,
      ...(endId === undefined ? {} : { endId }),
    }));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.signal();
    const connecting = this.connected;
    this.connected = undefined;
    if (connecting !== undefined) await connecting.catch(() => undefined);
    if (this.client.isOpen) await this.client.close();
  }

  private connect(): Promise<RedisClient> {
    this.connected ??= this.client.connect();
    return this.connected.then(() => this.client);
  }

  private splitFinished(split: ReadingSplit): boolean {
    return split.endId !== undefined && compareIds(split.lastId, split.endId) >= 0;
  }

  private signal(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const wake = this.wake;
    this.waiting = undefined;
    this.wake = undefined;
    wake?.();
  }
}

/** Orders two stream ids (`<ms>-<seq>`). */
function compareIds(left: string, right: string): number {
  const [leftMs = 0n, leftSeq = 0n] = left.split("-").map(BigInt);
  const [rightMs = 0n, rightSeq = 0n] = right.split("-").map(BigInt);
  if (leftMs !== rightMs) return leftMs < rightMs ? -1 : 1;
  return leftSeq === rightSeq ? 0 : leftSeq < rightSeq ? -1 : 1;
}
