/**
 * Reads one split: its initial snapshot (when asked for) and then its replication stream, keeping
 * the position that the checkpoint stores. The rules:
 *
 * - A transaction whose commit LSN is before `flushLsn` was handed out already: skipped on replay.
 *   The one that was being handed out at the checkpoint (`partial`) is replayed from its next change.
 * - A keepalive outside a transaction moves `flushLsn` to the server's sent position: nothing
 *   before it is still to come, so an idle table does not hold WAL on the server.
 * - After a resumed initial snapshot, a stream change of a row that a resumed read already saw
 *   (its transaction is visible in that read's snapshot) is skipped — see {@link ResumedSegment}.
 */
import type { Logger } from "@onceflow/core";
import type pg from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { ChangeDecoder } from "./change-decoder.js";
import { PostgresChangeDecodingError, PostgresReplicationConnectionError } from "./changes-errors.js";
import { isVisibleIn, type PostgresChangesSplit, type SnapshotTableProgress } from "./changes-split.js";
import { primaryKeyOf, SnapshotCursor } from "./initial-snapshot.js";
import { bigIntToLsn, lsnToBigInt } from "./lsn.js";
import { parsePgOutputMessage } from "./pgoutput-messages.js";
import type { PostgresChange } from "./postgres-change.js";
import { dropSlot, ensurePublication, slotState } from "./replication-setup.js";
import { ReplicationStream } from "./replication-stream.js";

/** What a split reader needs from the source's options. */
export interface SplitReaderSettings {
  readonly clientConfig: pg.ClientConfig;
  readonly admin: pg.Pool;
  readonly where: string;
  readonly initialSnapshot: boolean;
  readonly snapshotPageSize: number;
  readonly maxBatchSize: number;
  readonly statusIntervalMs: number;
  readonly createPublication: boolean;
  readonly logger: Logger;
}

interface TransactionReplay {
  readonly commitLsn: string;
  readonly skipAll: boolean;
  toSkip: number;
  handedOut: number;
}

/**
 * The reader of one {@link PostgresChangesSplit}.
 *
 * @example
 * ```ts
 * const reader = await SplitReader.open(split, settings, isRestored);
 * const records = await reader.poll();
 * ```
 */
export class SplitReader {
  private flushLsn: bigint;
  private partial: { commitLsn: string; changes: number } | undefined;
  private snapshotProgress: { consistentPoint: string; tables: SnapshotTableProgress[] } | undefined;
  private cursor: SnapshotCursor | undefined;
  private readonly decoder: ChangeDecoder;
  private replay: TransactionReplay | undefined;
  private readonly keyTypes = new Map<string, { columns: string[]; types: string[] }>();

  private constructor(
    readonly split: PostgresChangesSplit,
    private readonly settings: SplitReaderSettings,
    private readonly stream: ReplicationStream,
    flushLsn: string,
  ) {
    this.flushLsn = lsnToBigInt(flushLsn);
    this.partial = split.partial === undefined ? undefined : { ...split.partial };
    this.decoder = new ChangeDecoder(settings.logger);
  }

  /**
   * Creates the publication and slot of a split never started (taking the initial snapshot when
   * asked), or reopens the slot of a restored one.
   */
  static async open(split: PostgresChangesSplit, settings: SplitReaderSettings): Promise<SplitReader> {
    const { admin, logger } = settings;
    const state = await slotState(admin, split.slotName);
    if (split.flushLsn !== undefined) {
      if (state === undefined || state.walStatus === "lost") {
        throw new PostgresConfigurationError(
          "slotName",
          PostgresErrorReason.replicationSlotLost,
          `replication slot "${split.slotName}" of split "${split.splitId}" ${state === undefined ? "does not exist" : "lost WAL it needed (max_slot_wal_keep_size)"}: ` +
            `the changes after ${split.flushLsn} are gone from the server. Start the job without restoring a checkpoint ` +
            "(a new slot and, with initialSnapshot, a new snapshot), and keep slots from being dropped while the job is stopped",
          {},
        );
      }
      const stream = await ReplicationStream.connect(settings.clientConfig, settings.where);
      const reader = new SplitReader(split, settings, stream, split.flushLsn);
      try {
        if (split.snapshot !== undefined) {
          reader.snapshotProgress = {
            consistentPoint: split.snapshot.consistentPoint,
            tables: [...split.snapshot.tables],
          };
          if (reader.snapshotProgress.tables.some((table) => !table.done)) {
            logger.info(
              { split: split.splitId },
              "resuming the interrupted initial snapshot with a new read snapshot",
            );
            reader.cursor = await SnapshotCursor.open(
              settings.clientConfig,
              undefined,
              reader.snapshotProgress.tables,
              split.snapshot.consistentPoint,
            );
            reader.snapshotProgress.tables = reader.cursor.progress;
          }
        }
        stream.start(split.slotName, split.publication, split.flushLsn, settings.statusIntervalMs);
      } catch (error) {
        await reader.close();
        throw error;
      }
      return reader;
    }

    if (settings.createPublication)
      await ensurePublication(admin, split.publication, split.tables, "publication");
    if (state?.active === true) {
      throw new PostgresReplicationConnectionError(
        `replication slot "${split.slotName}" is in use by another connection (an older process of this job, ` +
          "or another job with the same slot name): retried until it is free",
        { details: { slot: split.slotName } },
      );
    }
    if (state !== undefined) {
      // Left by a start that completed no checkpoint: nothing read through it was committed.
      logger.info(
        { slot: split.slotName },
        "dropping a replication slot left by a start that completed no checkpoint",
      );
      await dropSlot(admin, split.slotName);
    }
    const stream = await ReplicationStream.connect(settings.clientConfig, settings.where);
    let reader: SplitReader | undefined;
    try {
      const { consistentPoint, snapshotName } = await stream.createSlot(
        split.slotName,
        settings.initialSnapshot,
      );
      reader = new SplitReader(split, settings, stream, consistentPoint);
      if (settings.initialSnapshot && snapshotName !== undefined) {
        for (const table of split.tables) {
          const key = await primaryKeyOf(admin, table);
          if (key.columns.length === 0) {
            throw new PostgresConfigurationError(
              "initialSnapshot",
              PostgresErrorReason.publicationMismatch,
              `table ${table} has no primary key: the initial snapshot reads in key order. Add one, or set initialSnapshot: false`,
            );
          }
        }
        const tables = split.tables.map((table) => ({
          table,
          done: false,
          lastKey: null,
          rowsRead: 0,
          segments: [],
        }));
        // The exported snapshot must be imported before the replication connection runs its next command.
        reader.cursor = await SnapshotCursor.open(
          settings.clientConfig,
          snapshotName,
          tables,
          consistentPoint,
        );
        reader.snapshotProgress = { consistentPoint, tables: reader.cursor.progress };
      }
      stream.start(split.slotName, split.publication, consistentPoint, settings.statusIntervalMs);
      logger.info({ slot: split.slotName, consistentPoint }, "created the replication slot");
    } catch (error) {
      if (reader !== undefined) await reader.close();
      else await stream.close();
      throw error;
    }
    return reader;
  }

  /** True while the initial snapshot is being read (records are ready without waiting for the stream). */
  get snapshotting(): boolean {
    return this.cursor !== undefined;
  }

  /** Resolves when {@link poll} may return records. */
  available(): Promise<void> {
    return this.cursor !== undefined ? Promise.resolve() : this.stream.available();
  }

  /** The next records (possibly none), updating the position as they are handed out. */
  async poll(): Promise<PostgresChange[]> {
    const cursor = this.cursor;
    if (cursor !== undefined) {
      const records = (await cursor.next(this.settings.snapshotPageSize)) ?? [];
      if (this.snapshotProgress !== undefined) this.snapshotProgress.tables = cursor.progress;
      if (cursor.done) {
        this.cursor = undefined;
        await cursor.close();
      }
      return records;
    }
    const out: PostgresChange[] = [];
    while (out.length < this.settings.maxBatchSize) {
      const item = this.stream.take();
      if (item === undefined) break;
      if (item.kind === "keepalive") {
        if (this.decoder.openTransaction === undefined && item.walEnd > this.flushLsn)
          this.flushLsn = item.walEnd;
        continue;
      }
      let message: ReturnType<typeof parsePgOutputMessage>;
      try {
        message = parsePgOutputMessage(item.payload);
      } catch (error) {
        throw new PostgresChangeDecodingError(
          `a pgoutput message at ${bigIntToLsn(item.walStart)} could not be parsed: ${(error as Error).message}`,
          { walStart: bigIntToLsn(item.walStart), slot: this.split.slotName },
        );
      }
      const records = this.decoder.decode(message);
      if (message.tag === "begin") {
        const commit = lsnToBigInt(message.finalLsn);
        const resumed = this.partial?.commitLsn === message.finalLsn ? this.partial.changes : 0;
        this.replay = {
          commitLsn: message.finalLsn,
          skipAll: commit < this.flushLsn,
          toSkip: resumed,
          handedOut: resumed,
        };
        continue;
      }
      if (message.tag === "commit") {
        const end = lsnToBigInt(message.endLsn);
        if (end > this.flushLsn) this.flushLsn = end;
        this.partial = undefined;
        this.replay = undefined;
        this.dropSpentSegments();
        continue;
      }
      const replay = this.replay;
      for (const record of records) {
        if (replay === undefined || replay.skipAll) continue;
        if (replay.toSkip > 0) {
          replay.toSkip -= 1;
          continue;
        }
        replay.handedOut += 1;
        this.partial = { commitLsn: replay.commitLsn, changes: replay.handedOut };
        if (await this.readByResumedSnapshot(record)) continue;
        out.push(record);
      }
    }
    return out;
  }

  /** Whether a resumed snapshot read already holds this change's effect (see {@link ResumedSegment}). */
  private async readByResumedSnapshot(record: PostgresChange): Promise<boolean> {
    const tables = this.snapshotProgress?.tables;
    if (tables === undefined) return false;
    const qualified = `${record.schema}.${record.table}`;
    const progress = tables.find((table) => table.table === qualified || table.table === record.table);
    if (progress === undefined || progress.segments.length === 0) return false;
    const visible = progress.segments.map((segment) => isVisibleIn(record.xid, segment.snapshot));
    if (!visible.includes(true)) return false;
    if (record.kind === "truncate") {
      throw new PostgresChangeDecodingError(
        `${qualified} was truncated while its initial snapshot was interrupted (transaction ${record.xid}): ` +
          "the snapshot cannot be finished consistently. Start the job without restoring a checkpoint to take a new one",
        { table: qualified, xid: record.xid },
      );
    }
    const row = record.kind === "delete" ? record.before : record.after;
    let key = this.keyTypes.get(qualified);
    if (key === undefined) {
      key = await primaryKeyOf(this.settings.admin, progress.table);
      this.keyTypes.set(qualified, key);
    }
    const keyText = key.columns.map((column) => asText(row?.[column]));
    // The segment that read this row: the last one whose lower bound is before its key.
    for (let i = progress.segments.length - 1; i >= 0; i--) {
      const segment = progress.segments[i];
      if (segment === undefined) continue;
      if (segment.afterKey !== null && !(await this.keyAfter(key.types, keyText, segment.afterKey))) continue;
      return visible[i] === true;
    }
    return false;
  }

  private async keyAfter(types: string[], key: string[], bound: readonly string[]): Promise<boolean> {
    const n = types.length;
    const left = types.map((type, i) => `$${i + 1}::${type}`).join(", ");
    const right = types.map((type, i) => `$${i + 1 + n}::${type}`).join(", ");
    const result = await this.settings.admin.query<{ after: boolean }>(
      `select (${left}) > (${right}) as after`,
      [...key, ...bound],
    );
    return result.rows[0]?.after === true;
  }

  /** Resumed segments stop mattering once the stream is past every transaction they could see. */
  private dropSpentSegments(): void {
    const progress = this.snapshotProgress;
    if (progress === undefined || this.cursor !== undefined) return;
    const pending = progress.tables.some((table) =>
      table.segments.some((segment) => lsnToBigInt(segment.takenAtLsn) >= this.flushLsn),
    );
    if (!pending) this.snapshotProgress = undefined;
  }

  /** The split with its current position, for a checkpoint. */
  snapshotState(): PostgresChangesSplit {
    return {
      splitId: this.split.splitId,
      slotName: this.split.slotName,
      publication: this.split.publication,
      tables: this.split.tables,
      flushLsn: bigIntToLsn(this.flushLsn),
      ...(this.partial === undefined ? {} : { partial: { ...this.partial } }),
      ...(this.snapshotProgress === undefined
        ? {}
        : {
            snapshot: {
              consistentPoint: this.snapshotProgress.consistentPoint,
              tables: [...this.snapshotProgress.tables],
            },
          }),
    };
  }

  /** Lets the server drop WAL before `lsn` (a completed checkpoint's `flushLsn`). */
  confirm(lsn: string): void {
    this.stream.confirm(lsnToBigInt(lsn));
  }

  async close(): Promise<void> {
    const cursor = this.cursor;
    this.cursor = undefined;
    await cursor?.close();
    await this.stream.close();
  }
}

function asText(value: unknown): string {
  if (Buffer.isBuffer(value)) return `\\x${value.toString("hex")}`;
  if (typeof value === "boolean") return value ? "t" : "f";
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}
