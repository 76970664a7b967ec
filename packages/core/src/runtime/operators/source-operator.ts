import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import { type Counter, MetricNames } from "../../observability/metrics.js";
import type { Source, SourceReader, SourceSplit } from "../../source/source.js";
import { defaultSerializerFor, type TypeSerializer } from "../../state/serializer.js";
import {
  CombinedWatermark,
  type ResolvedWatermarkStrategy,
  resolveWatermarkStrategy,
  WatermarkGenerator,
  type WatermarkStrategy,
} from "../../time/watermark-strategy.js";
import { assignSplit } from "../split-assignment.js";
import {
  type OperatorEnvironment,
  type OperatorSnapshot,
  type RecordBatch,
  StreamOperator,
} from "./stream-operator.js";

/** Separates a source's uid from its split ids in split keys (`orders/orders-3`). */
export const SPLIT_KEY_SEPARATOR = "/";

/**
 * Drives one source's reader in a subtask: assigns splits (restored ones win, new ones are added
 * as discovered), stamps event times, and emits the subtask's watermark for this source — the
 * minimum over its active splits, each at its highest event time minus the allowed lateness.
 */
export class SourceOperator extends StreamOperator {
  private reader: SourceReader<unknown, SourceSplit> | undefined;
  private readonly serializer: TypeSerializer<SourceSplit>;
  private readonly generators = new Map<string, WatermarkGenerator>();
  private readonly combined = new CombinedWatermark();
  private readonly watermarks: ResolvedWatermarkStrategy<unknown> | undefined;
  private readonly knownSplitIds = new Set<string>();
  private restoredSplits: SourceSplit[] = [];
  private environment: OperatorEnvironment | undefined;
  private recordsIn: Counter | undefined;
  private labels: Record<string, string> = {};
  private emittedWatermark = -Infinity;
  private nextDiscoveryAt = Infinity;
  private discovery: Promise<SourceSplit[]> | undefined;
  private discovered: SourceSplit[] | undefined;
  /** True once the reader has read every split to its end. */
  finished = false;
  /** True when reading was stopped (stop-with-checkpoint): no more polling. */
  stopped = false;

  constructor(
    uid: string,
    private readonly source: Source<unknown, SourceSplit>,
    watermarks: WatermarkStrategy<unknown> | undefined,
  ) {
    super(uid);
    this.watermarks = watermarks ? resolveWatermarkStrategy(watermarks) : undefined;
    this.serializer = source.splitSerializer ?? defaultSerializerFor<SourceSplit>();
  }

  /** Split ids this operator has restored, for discovery to skip. */
  override async initialize(
    environment: OperatorEnvironment,
    restored: OperatorSnapshot | undefined,
  ): Promise<void> {
    this.environment = environment;
    this.recordsIn = environment.metrics.counter(MetricNames.recordsIn, "Records read by sources");
    this.labels = { job: environment.jobId, subtask: String(environment.subtaskIndex), operator: this.uid };
    this.recordsIn.inc(0, this.labels);
    for (const entry of restored?.splits ?? []) {
      const split = this.serializer.deserialize(entry.bytes);
      this.restoredSplits.push(split);
      if (entry.maxTimestamp !== undefined)
        this.generatorOf(split.splitId, Date.now()).onEvent(entry.maxTimestamp);
    }
    for (const splitId of restoredSplitIdsOf(restored)) this.knownSplitIds.add(splitId);
    this.reader = await this.source.createReader({
      jobId: environment.jobId,
      operatorUid: this.uid,
      subtaskIndex: environment.subtaskIndex,
      parallelism: environment.parallelism,
      isRestored: environment.restoredCheckpointId !== undefined,
      checkpointingInterval: environment.checkpointingInterval,
      logger: environment.logger.child({ operator: this.uid, subtask: environment.subtaskIndex }),
      metrics: environment.metrics,
    });
  }

  override async open(): Promise<void> {
    const discovered = await this.discoverSplits();
    const splits = [...this.restoredSplits, ...this.ownNewSplits(discovered)];
    this.restoredSplits = [];
    this.trackSplits(splits);
    await this.reader!.addSplits(splits);
    await this.reader!.start?.();
    const interval = this.source.splitDiscoveryIntervalMs;
    if (interval !== undefined && interval > 0) this.nextDiscoveryAt = Date.now() + interval;
  }

  processBatch(_batch: RecordBatch): void {
    throw new Error(`source '${this.uid}' has no input`);
  }

  /** Reads and emits at most one batch. Returns whether a batch was emitted. */
  async pollOnce(now: number): Promise<boolean> {
    if (this.finished || this.stopped) return false;
    await this.addDiscoveredSplits(now);
    const reader = this.reader!;
    const batch = await reader.pollNext();
    if (!batch) {
      if (reader.isFinished() && !this.discovery) {
        this.finished = true;
        await this.emitIdleness(false);
        await this.advanceWatermark(Infinity);
      } else if (this.knownSplitIds.size === 0) {
        // No split here (more subtasks than splits): nothing to wait for, so this subtask must not
        // hold back the watermark of the operators after an exchange or a union — as Flink marks
        // a source subtask without splits idle.
        await this.emitIdleness(true);
      } else if (this.watermarks?.idleness !== undefined) {
        await this.advanceWatermark(this.computeWatermark(now));
        await this.emitIdleness(this.allSplitsIdle(now));
      }
      return false;
    }
    const records = batch.records;
    if (records.length === 0) return false;
    const timestamps = this.stampEventTimes(batch.records, batch.timestamps);
    if (timestamps && this.watermarks) this.observe(batch.splitId, timestamps, now);
    this.recordsIn!.inc(records.length, this.labels);
    await this.emit({
      splitKey: `${this.uid}${SPLIT_KEY_SEPARATOR}${batch.splitId}`,
      values: records,
      timestamps,
    });
    if (this.watermarks) {
      await this.emitIdleness(false);
      await this.advanceWatermark(this.computeWatermark(now));
    }
    return true;
  }

  /** Resolves when the reader may have data, or discovery is due. */
  isAvailable(): Promise<void> {
    return this.reader!.isAvailable();
  }

  /** When discovery next wants to run (for the subtask loop's sleep). */
  nextDiscoveryTime(): number | undefined {
    return Number.isFinite(this.nextDiscoveryAt) ? this.nextDiscoveryAt : undefined;
  }

  override async snapshot({ checkpointId }: FunctionSnapshotContext): Promise<OperatorSnapshot> {
    const splits = this.reader!.snapshotState(checkpointId).map((split) => ({
      splitKey: `${this.uid}${SPLIT_KEY_SEPARATOR}${split.splitId}`,
      bytes: this.serializer.serialize(split),
      maxTimestamp: this.generators.get(split.splitId)?.snapshot().maxTimestamp ?? undefined,
    }));
    return { splits };
  }

  override async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    await this.reader?.notifyCheckpointComplete?.(checkpointId);
  }

  override async notifyCheckpointAborted(checkpointId: number): Promise<void> {
    await this.reader?.notifyCheckpointAborted?.(checkpointId);
  }

  override async close(): Promise<void> {
    await this.reader?.close();
  }

  private async discoverSplits(): Promise<SourceSplit[]> {
    return this.source.discoverSplits({
      jobId: this.environment!.jobId,
      parallelism: this.environment!.parallelism,
      logger: this.environment!.logger,
    });
  }

  private ownNewSplits(splits: SourceSplit[]): SourceSplit[] {
    const { subtaskIndex, parallelism } = this.environment!;
    return splits.filter(
      (split) =>
        !this.knownSplitIds.has(split.splitId) &&
        assignSplit(this.source, split, parallelism) === subtaskIndex,
    );
  }

  // Discovery runs beside the loop; its result is applied here, between batches.
  private async addDiscoveredSplits(now: number): Promise<void> {
    if (this.discovered) {
      const added = this.ownNewSplits(this.discovered);
      this.discovered = undefined;
      if (added.length > 0) {
        this.trackSplits(added);
        this.environment!.logger.info(
          { splits: added.map((split) => split.splitId) },
          "new splits discovered",
        );
        await this.reader!.addSplits(added);
      }
    }
    if (now < this.nextDiscoveryAt || this.discovery) return;
    this.discovery = this.discoverSplits();
    this.discovery
      .then((splits) => {
        this.discovered = splits;
      })
      .catch((error: unknown) => {
        this.environment!.logger.warn(
          { error: String(error) },
          "split discovery failed; retrying at the next interval",
        );
      })
      .finally(() => {
        this.discovery = undefined;
        this.nextDiscoveryAt = Date.now() + (this.source.splitDiscoveryIntervalMs ?? Infinity);
      });
  }

  private stampEventTimes(
    records: readonly unknown[],
    sourceTimestamps: readonly number[] | undefined,
  ): ReadonlyArray<number | undefined> | undefined {
    const assigner = this.watermarks?.timestampAssigner;
    if (!assigner) return sourceTimestamps;
    const timestamps = new Array<number>(records.length);
    for (let index = 0; index < records.length; index++) {
      timestamps[index] = assigner(records[index], sourceTimestamps?.[index]);
    }
    return timestamps;
  }

  // Every assigned split holds the watermark back from the start, even before its first record:
  // otherwise a fast split would push the watermark past records a slow split has yet to emit.
  private trackSplits(splits: readonly SourceSplit[]): void {
    const now = Date.now();
    for (const split of splits) {
      this.knownSplitIds.add(split.splitId);
      if (this.watermarks) this.generatorOf(split.splitId, now);
    }
  }

  private generatorOf(splitId: string, now: number): WatermarkGenerator {
    let generator = this.generators.get(splitId);
    if (!generator) {
      generator = new WatermarkGenerator(this.watermarks ?? {}, now);
      this.generators.set(splitId, generator);
    }
    return generator;
  }

  private observe(splitId: string, timestamps: ReadonlyArray<number | undefined>, now: number): void {
    const generator = this.generatorOf(splitId, now);
    generator.markActivity(now);
    for (const timestamp of timestamps) if (timestamp !== undefined) generator.onEvent(timestamp);
  }

  /** Minimum over active splits; idle ones (per `idleness`) do not hold it back. */
  private computeWatermark(now: number): number {
    for (const [splitId, generator] of this.generators) {
      this.combined.setSplit(splitId, generator.currentWatermark(), generator.isIdle(now));
    }
    this.combined.update();
    return this.combined.currentWatermark();
  }

  private allSplitsIdle(now: number): boolean {
    if (this.generators.size === 0) return false;
    for (const generator of this.generators.values()) if (!generator.isIdle(now)) return false;
    return true;
  }

  private async advanceWatermark(watermark: number): Promise<void> {
    if (watermark <= this.emittedWatermark) return;
    this.emittedWatermark = watermark;
    this.currentWatermark = watermark;
    await this.emitWatermark(watermark);
  }
}

function restoredSplitIdsOf(restored: OperatorSnapshot | undefined): string[] {
  return (restored?.splits ?? []).map((entry) =>
    entry.splitKey.slice(entry.splitKey.indexOf(SPLIT_KEY_SEPARATOR) + 1),
  );
}
