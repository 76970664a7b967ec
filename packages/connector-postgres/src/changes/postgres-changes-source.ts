import type {
  Logger,
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SplitEnumeratorContext,
} from "@onceflow/core";
import type pg from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { loggableError } from "../sql/pg-errors.js";
import { pgDriver } from "../sql/pg-loader.js";
import type { PostgresChangesSplit } from "./changes-split.js";
import type { PostgresChange } from "./postgres-change.js";
import {
  checkLogicalReplication,
  ensurePublication,
  replicationName,
  retainedWalBytes,
} from "./replication-setup.js";
import { SplitReader, type SplitReaderSettings } from "./split-reader.js";

/**
 * Options of {@link PostgresChangesSource}.
 *
 * @example
 * ```ts
 * const options: PostgresChangesSourceOptions = {
 *   connection: "postgresql://cdc@db:5432/shop",
 *   tables: ["public.orders", "public.order_lines"],
 * };
 * ```
 */
export interface PostgresChangesSourceOptions {
  /** Where to connect; the role needs REPLICATION and SELECT on the tables (and CREATE for the publication). */
  readonly connection: string | pg.ClientConfig;
  /** Tables to capture, `schema.table` (`table` means `public.table`). Default: every table of `publication`. */
  readonly tables?: readonly string[];
  /**
   * The publication to read. Created `FOR TABLE <tables>` if it does not exist; an existing one
   * (yours) is used as it is and must publish every table in `tables`. Default `onceflow_<jobId>`.
   * With `splitPerTable`, each table gets its own: `<publication>_<table>`.
   */
  readonly publication?: string;
  /** The replication slot's name (with `splitPerTable`, its prefix). Default `onceflow_<jobId>`. */
  readonly slotName?: string;
  /**
   * One split (a slot and a publication) per table, so tables spread over the subtasks; default
   * false: one slot for all tables, read by one subtask, so changes keep the order of their commits
   * across tables.
   */
  readonly splitPerTable?: boolean;
  /** Read the tables' current rows (`read` records) before the changes after them. Default true. */
  readonly initialSnapshot?: boolean;
  /** Rows per query of the initial snapshot. Default 1000. */
  readonly snapshotPageSize?: number;
  /** Most change records per batch. Default 500. */
  readonly maxBatchSize?: number;
  /** How often the source tells the server it is alive (standby status). Default 10 s. */
  readonly statusIntervalMs?: number;
  /** Warn when a slot keeps more WAL than this many bytes. Default 1 GiB. */
  readonly retainedWalWarningBytes?: number;
  /** The source's name in logs and metrics. Default "postgres-changes". */
  readonly name?: string;
}

/**
 * The gauge of WAL bytes the server keeps for a slot (label `slot`), set at every completed checkpoint.
 *
 * @example
 * ```ts
 * metrics.read(RETAINED_WAL_METRIC); // with createMemoryMetrics()
 * ```
 */
export const RETAINED_WAL_METRIC = "onceflow_postgres_replication_slot_retained_wal_bytes";

/**
 * Change data capture from PostgreSQL: the committed inserts, updates, deletes and truncates of the
 * captured tables, in commit order, as typed {@link PostgresChange} records — over logical
 * replication with the built-in `pgoutput` plugin (PostgreSQL 10+, `wal_level = logical`).
 * Exactly-once with a checkpointing job: the position (LSN) is in the checkpoint, and the slot's
 * `confirmed_flush_lsn` advances only when a checkpoint that covers it completes, so the server
 * keeps every change a restore may need.
 *
 * On first start it creates the publication (unless it exists) and a replication slot per split,
 * and with `initialSnapshot` reads the tables' rows in the slot's exported snapshot, then streams
 * from the slot's consistent point: no gap, no overlap.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "orders-outbox", checkpointing: { interval: 1000, storage } });
 * job
 *   .fromSource(new PostgresChangesSource({ connection: process.env.DATABASE_URL, tables: ["public.orders"] }), { uid: "orders-changes" })
 *   .map((change) => ({ key: String(change.after?.id ?? change.before?.id), value: JSON.stringify(change) }))
 *   .sinkTo(kafkaSink);
 * ```
 */
export class PostgresChangesSource implements Source<PostgresChange, PostgresChangesSplit> {
  readonly name: string;
  readonly boundedness = "continuous" as const;

  constructor(private readonly options: PostgresChangesSourceOptions) {
    this.name = options.name ?? "postgres-changes";
    for (const [setting, value] of [
      ["snapshotPageSize", options.snapshotPageSize],
      ["maxBatchSize", options.maxBatchSize],
      ["statusIntervalMs", options.statusIntervalMs],
    ] as const) {
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new PostgresConfigurationError(
          setting,
          PostgresErrorReason.invalidOption,
          `must be an integer ≥ 1, got ${value}`,
        );
      }
    }
    if (options.splitPerTable === true && (options.tables === undefined || options.tables.length === 0)) {
      throw new PostgresConfigurationError(
        "tables",
        PostgresErrorReason.invalidOption,
        "splitPerTable needs the list of tables: each gets its own publication and slot",
      );
    }
  }

  private clientConfig(): pg.ClientConfig {
    const { connection } = this.options;
    return typeof connection === "string" ? { connectionString: connection } : connection;
  }

  async discoverSplits(context: SplitEnumeratorContext): Promise<PostgresChangesSplit[]> {
    const publication = this.options.publication ?? replicationName("onceflow", context.jobId);
    const slot = this.options.slotName ?? replicationName("onceflow", context.jobId);
    const client = new (pgDriver().Client)(this.clientConfig());
    client.on("error", () => undefined);
    await client.connect();
    try {
      await checkLogicalReplication(client);
      if (this.options.splitPerTable === true) {
        return (this.options.tables ?? []).map((table) => ({
          splitId: table,
          slotName: replicationName(slot, table),
          publication: replicationName(publication, table),
          tables: [table],
        }));
      }
      const tables = await ensurePublication(client, publication, this.options.tables ?? [], "publication");
      return [{ splitId: slot, slotName: slot, publication, tables }];
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  createReader(context: SourceReaderContext): SourceReader<PostgresChange, PostgresChangesSplit> {
    const config = this.clientConfig();
    const admin = new (pgDriver().Pool)({ ...config, max: 2 });
    admin.on("error", (error) =>
      context.logger.warn(
        { error: loggableError(error) },
        "an idle PostgreSQL connection failed; the pool replaces it",
      ),
    );
    const where = `${config.host ?? "localhost"}:${config.port ?? 5432}/${config.database ?? ""}`;
    return new PostgresChangesReader(
      {
        clientConfig: config,
        admin,
        where: config.connectionString === undefined ? where : "the configured server",
        initialSnapshot: this.options.initialSnapshot ?? true,
        snapshotPageSize: this.options.snapshotPageSize ?? 1000,
        maxBatchSize: this.options.maxBatchSize ?? 500,
        statusIntervalMs: this.options.statusIntervalMs ?? 10_000,
        createPublication: this.options.splitPerTable === true,
        logger: context.logger,
      },
      context,
      this.options.retainedWalWarningBytes ?? 1024 ** 3,
    );
  }
}

class PostgresChangesReader implements SourceReader<PostgresChange, PostgresChangesSplit> {
  private readonly readers: SplitReader[] = [];
  private next = 0;
  private readonly checkpoints = new Map<number, Map<string, string>>();
  private readonly logger: Logger;
  private closed = false;

  constructor(
    private readonly settings: SplitReaderSettings,
    private readonly context: SourceReaderContext,
    private readonly retainedWalWarningBytes: number,
  ) {
    this.logger = context.logger;
  }

  async addSplits(splits: PostgresChangesSplit[]): Promise<void> {
    for (const split of splits) {
      const reader = await SplitReader.open(split, this.settings);
      if (this.closed) {
        await reader.close();
        return;
      }
      this.readers.push(reader);
    }
  }

  async pollNext(): Promise<SourceBatch<PostgresChange> | undefined> {
    for (let i = 0; i < this.readers.length; i++) {
      const reader = this.readers[(this.next + i) % this.readers.length];
      if (reader === undefined) continue;
      const records = await reader.poll();
      if (records.length > 0) {
        this.next = (this.next + i + 1) % this.readers.length;
        return { splitId: reader.split.splitId, records };
      }
    }
    return undefined;
  }

  isAvailable(): Promise<void> {
    if (this.readers.length === 0) return new Promise(() => undefined);
    return Promise.race(this.readers.map((reader) => reader.available()));
  }

  isFinished(): boolean {
    return false;
  }

  snapshotState(checkpointId: number): PostgresChangesSplit[] {
    const states = this.readers.map((reader) => reader.snapshotState());
    this.checkpoints.set(
      checkpointId,
      new Map(states.map((state) => [state.splitId, state.flushLsn ?? "0/0"] as const)),
    );
    return states;
  }

  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    const positions = this.checkpoints.get(checkpointId);
    for (const id of [...this.checkpoints.keys()]) if (id <= checkpointId) this.checkpoints.delete(id);
    if (positions === undefined) return;
    const gauge = this.context.metrics.gauge(RETAINED_WAL_METRIC, "WAL bytes PostgreSQL keeps for the slot");
    for (const reader of this.readers) {
      const lsn = positions.get(reader.split.splitId);
      if (lsn === undefined) continue;
      reader.confirm(lsn);
      const bytes = await retainedWalBytes(this.settings.admin, reader.split.slotName).catch(() => undefined);
      if (bytes === undefined) continue;
      gauge.set(bytes, { slot: reader.split.slotName });
      if (bytes > this.retainedWalWarningBytes) {
        this.logger.warn(
          { slot: reader.split.slotName, retainedWalBytes: bytes, confirmedLsn: lsn },
          "the replication slot keeps much WAL on the server: the job reads slower than the tables change, or was stopped long",
        );
      }
    }
  }

  notifyCheckpointAborted(checkpointId: number): void {
    this.checkpoints.delete(checkpointId);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const reader of this.readers.splice(0)) await reader.close().catch(() => undefined);
    await this.settings.admin.end().catch(() => undefined);
  }
}
