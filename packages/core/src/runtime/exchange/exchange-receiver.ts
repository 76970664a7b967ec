import type {
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SourceSplit,
  SplitEnumeratorContext,
} from "../../source/source.js";
import { operatorIndexForKeyGroup } from "../../state/key-groups.js";
import { defaultSerializerFor, type TypeSerializer } from "../../state/serializer.js";
import { SourceOperator } from "../operators/source-operator.js";
import type { ExchangeChannel, ExchangeRecord } from "./cross-process-exchange.js";

/** What the keyed side knows of one sender in one key group. */
interface SenderProgress {
  readonly senderParallelism: number;
  readonly watermark: number;
  readonly idle: boolean;
  readonly ended: boolean;
}

/**
 * A split of the exchange's source (one key group) with what its control records said so far:
 * kept in the checkpoint with the split's position, so both move together on rescale.
 */
interface ChannelSplit extends SourceSplit {
  readonly keyGroup: number;
  readonly inner: SourceSplit;
  readonly senders: ReadonlyArray<readonly [sender: number, progress: SenderProgress]>;
}

interface KeyGroupProgress {
  readonly keyGroup: number;
  senders: Map<number, SenderProgress>;
}

/**
 * The exchange's source as the keyed side reads it: splits go to the subtask that owns their key
 * group, control records are taken out of the stream and kept per key group.
 */
export class ChannelSource implements Source<unknown, ChannelSplit> {
  readonly name: string;
  readonly boundedness = "bounded" as const;
  readonly splitSerializer: TypeSerializer<ChannelSplit>;
  readonly splitDiscoveryIntervalMs: number | undefined;

  constructor(
    private readonly channel: ExchangeChannel,
    private readonly maxParallelism: number,
  ) {
    const inner = channel.source;
    this.name = inner.name;
    this.splitDiscoveryIntervalMs = inner.splitDiscoveryIntervalMs;
    const innerSerializer = inner.splitSerializer ?? defaultSerializerFor<SourceSplit>();
    const outer = defaultSerializerFor<Omit<ChannelSplit, "inner"> & { inner: Buffer }>();
    this.splitSerializer = {
      serialize: (split) => outer.serialize({ ...split, inner: innerSerializer.serialize(split.inner) }),
      deserialize: (bytes) => {
        const stored = outer.deserialize(bytes);
        return { ...stored, inner: innerSerializer.deserialize(stored.inner) };
      },
    };
  }

  async discoverSplits(context: SplitEnumeratorContext): Promise<ChannelSplit[]> {
    const splits = await this.channel.source.discoverSplits(context);
    return splits.map((inner) => ({
      splitId: inner.splitId,
      keyGroup: this.channel.keyGroupOf(inner),
      inner,
      senders: [],
    }));
  }

  assignSplit(split: ChannelSplit, parallelism: number): number {
    return operatorIndexForKeyGroup(this.maxParallelism, parallelism, split.keyGroup);
  }

  async createReader(context: SourceReaderContext): Promise<ChannelReader> {
    return new ChannelReader(await this.channel.source.createReader(context), context.parallelism);
  }
}

/** Reads the exchange's records for this subtask's key groups; see {@link ChannelSource}. */
export class ChannelReader implements SourceReader<unknown, ChannelSplit> {
  private readonly progress = new Map<string, KeyGroupProgress>();

  constructor(
    private readonly inner: SourceReader<ExchangeRecord, SourceSplit>,
    /** The job's parallelism now: every sender below it holds event time back until it writes. */
    private readonly parallelism: number,
  ) {}

  start(): Promise<void> | void {
    return this.inner.start?.();
  }

  addSplits(splits: ChannelSplit[]): Promise<void> | void {
    for (const split of splits) {
      this.progress.set(split.splitId, { keyGroup: split.keyGroup, senders: new Map(split.senders) });
    }
    return this.inner.addSplits(splits.map((split) => split.inner));
  }

  async pollNext(): Promise<SourceBatch<unknown> | undefined> {
    for (;;) {
      const batch = await this.inner.pollNext();
      if (!batch) return undefined;
      const records: unknown[] = [];
      const timestamps: number[] = [];
      let timed = false;
      const progress = this.progress.get(batch.splitId);
      for (const record of batch.records) {
        if (record.kind === "data") {
          records.push(record.value);
          timestamps.push(record.timestamp as number);
          if (record.timestamp !== undefined) timed = true;
        } else if (progress) {
          noteControl(progress, record);
        }
      }
      if (records.length > 0) return { splitId: batch.splitId, records, ...(timed ? { timestamps } : {}) };
    }
  }

  isAvailable(): Promise<void> {
    return this.inner.isAvailable();
  }

  /** True when every sender of every key group here has ended. */
  isFinished(): boolean {
    if (this.progress.size === 0) return false;
    for (const progress of this.progress.values()) {
      for (const sender of this.sendersOf(progress)) {
        if (!progress.senders.get(sender)?.ended) return false;
      }
    }
    return true;
  }

  /**
   * The keyed side's event time: the minimum over this subtask's key groups and every sender of
   * each (one that has not written yet counts as `-Infinity`). Ended senders are left out, and so
   * is a sender idle (`withIdleness`) in every key group here; one idle in some key groups only may
   * have records ahead in the others, so all of its key groups count. When every sender left is
   * idle, the input is idle at the highest of their watermarks — what Flink's `StatusWatermarkValve`
   * does when all its channels are idle.
   */
  eventTime(): { watermark: number; idle: boolean } {
    const idleEverywhere = new Map<number, boolean>();
    for (const progress of this.progress.values()) {
      for (const sender of this.sendersOf(progress)) {
        const known = progress.senders.get(sender);
        if (known?.ended) continue;
        idleEverywhere.set(sender, (idleEverywhere.get(sender) ?? true) && known?.idle === true);
      }
    }
    let watermark = Infinity;
    let active = 0;
    let idle = 0;
    let highestIdle = -Infinity;
    for (const progress of this.progress.values()) {
      for (const sender of this.sendersOf(progress)) {
        const known = progress.senders.get(sender);
        if (known?.ended) continue;
        const value = known?.watermark ?? -Infinity;
        if (idleEverywhere.get(sender)) {
          idle++;
          if (value > highestIdle) highestIdle = value;
          continue;
        }
        active++;
        if (value < watermark) watermark = value;
      }
    }
    if (active === 0) return { watermark: idle > 0 ? highestIdle : Infinity, idle: idle > 0 };
    return { watermark, idle: false };
  }

  snapshotState(checkpointId: number): ChannelSplit[] {
    const byId = new Map(this.inner.snapshotState(checkpointId).map((split) => [split.splitId, split]));
    const splits: ChannelSplit[] = [];
    for (const [splitId, progress] of this.progress) {
      const inner = byId.get(splitId);
      if (!inner) continue;
      splits.push({ splitId, keyGroup: progress.keyGroup, inner, senders: [...progress.senders] });
    }
    return splits;
  }

  notifyCheckpointComplete(checkpointId: number): Promise<void> | void {
    return this.inner.notifyCheckpointComplete?.(checkpointId);
  }

  notifyCheckpointAborted(checkpointId: number): Promise<void> | void {
    return this.inner.notifyCheckpointAborted?.(checkpointId);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  // Senders of this parallelism, and every sender of the parallelism the key group last heard
  // from (restored after a rescale), whose records may still be ahead — also one not heard from in
  // this key group yet (it started late, say): until the new parallelism's first control record.
  private *sendersOf(progress: KeyGroupProgress): Iterable<number> {
    const heard = progress.senders.values().next().value?.senderParallelism ?? 0;
    const senders = Math.max(this.parallelism, heard);
    for (let sender = 0; sender < senders; sender++) yield sender;
  }
}

/**
 * Takes a control record into a key group's progress. Records of one parallelism all come before
 * those of the next in a key group (a rescale starts after the old senders' last writes), so the
 * first control record of another parallelism starts the key group's senders afresh. Watermarks
 * never go back per sender (a restarted sender writes its recomputed, lower one).
 */
function noteControl(progress: KeyGroupProgress, record: ExchangeRecord & { kind: "control" }): void {
  const { sender, senderParallelism, watermark, idle, ended } = record;
  const first = progress.senders.values().next().value;
  if (first !== undefined && first.senderParallelism !== senderParallelism) progress.senders = new Map();
  const known = progress.senders.get(sender);
  progress.senders.set(sender, {
    senderParallelism,
    watermark: Math.max(watermark, known?.watermark ?? -Infinity),
    idle,
    ended,
  });
}

/**
 * The keyed side of a `keyBy` exchange between processes: a source over the exchange's key groups
 * owned by this subtask, whose watermark is the minimum over senders (from their control records)
 * and whose input ends when every sender has ended — instead of a watermark strategy.
 */
export class ExchangeReceiverOperator extends SourceOperator {
  private readonly channelReaders: { current?: ChannelReader };
  private emittedChannelWatermark = -Infinity;

  constructor(uid: string, source: ChannelSource) {
    const readers: { current?: ChannelReader } = {};
    super(
      uid,
      {
        name: source.name,
        boundedness: source.boundedness,
        discoverSplits: (context) => source.discoverSplits(context),
        assignSplit: (split, parallelism) => source.assignSplit(split as ChannelSplit, parallelism),
        splitSerializer: source.splitSerializer as unknown as TypeSerializer<SourceSplit>,
        ...(source.splitDiscoveryIntervalMs === undefined
          ? {}
          : { splitDiscoveryIntervalMs: source.splitDiscoveryIntervalMs }),
        createReader: async (context) => {
          readers.current = await source.createReader(context);
          return readers.current;
        },
      },
      undefined,
    );
    this.channelReaders = readers;
  }

  override async pollOnce(now: number): Promise<boolean> {
    const progressed = await super.pollOnce(now);
    const reader = this.channelReaders.current;
    if (this.finished || !reader) return progressed;
    const { watermark, idle } = reader.eventTime();
    // Active before the watermark moves (an idle input's watermark is not taken downstream), and
    // idle again only after it: senders that all went idle still carry event time to where they were.
    const advances = watermark > this.emittedChannelWatermark && watermark < Infinity;
    if (!idle || advances) await this.emitIdleness(false);
    if (advances) {
      this.emittedChannelWatermark = watermark;
      this.currentWatermark = watermark;
      await this.emitWatermark(watermark);
    }
    if (idle) await this.emitIdleness(true);
    return progressed;
  }
}
