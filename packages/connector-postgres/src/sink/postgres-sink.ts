import {
  CheckpointError,
  type CommitErrorClassification,
  ConfigurationError,
  type FunctionSnapshotContext,
  type SinkContext,
  TransactionError,
  TwoPhaseCommitSink,
  type TypeSerializer,
} from "@onceflow/core";
import type { PoolClient } from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import type { ColumnEncoding } from "../sql/copy-text.js";
import { copyText, encodeCopyText } from "../sql/copy-writer.js";
import { literal, quote, shortHash, type TableName, tableName } from "../sql/identifiers.js";
import { isTransient, messageOf, SqlState, sqlState } from "../sql/pg-errors.js";
import { openPool, type PoolHandle } from "../sql/pool.js";
import { prepareTransaction } from "../sql/prepared-transactions.js";
import { asPermissionError, checkColumns, checkUniqueIndex, readTableSchema } from "../sql/table-schema.js";
import { ControlTables } from "./control-tables.js";
import type { PostgresSinkMode, PostgresSinkOptions, PostgresSinkTableOptions } from "./options.js";

/**
 * The durable handle of one PostgresSink transaction, as stored in checkpoints. Everything needed
 * to commit or abort it from another process is here.
 *
 * @example
 * ```ts
 * const txn: PostgresTransaction = { mode: "prepared", sinkId: "orders.out", subtask: 0, epoch: 3, sequence: 7, rows: 5000, checkpointId: 12, gid: "orders.out-0-12" };
 * ```
 */
export interface PostgresTransaction {
  readonly mode: "prepared" | "staging";
  readonly sinkId: string;
  readonly subtask: number;
  /** The epoch of the process that wrote it (see the epoch table). */
  readonly epoch: number;
  /** Counts the transactions of one epoch; names the staging table. */
  readonly sequence: number;
  /** Rows written into it. */
  rows: number;
  /** The checkpoint that pre-committed it. */
  checkpointId?: number;
  /** Prepared mode: the gid, once prepared (absent for an empty transaction). */
  gid?: string;
  /** Staging mode: the staging table's name (in the target's schema), created on the first row. */
  stageTable?: string;
}

/** What a live transaction holds in this process only (never checkpointed). */
interface OpenHandle {
  /** Rows (or records, for a custom write) not yet sent: at most `batchSize`. */
  buffer: unknown[];
  /** Prepared mode: the connection with the open transaction. */
  client?: PoolClient;
  /** An error the connection reported while idle in the transaction. */
  clientError?: Error;
  /** Removes this transaction's error listener from the pooled connection. */
  detach?: () => void;
  /** The batch being sent: one is in flight while the next is collected (awaited before the next and at pre-commit). */
  inFlight?: Promise<void>;
  /** Staging mode: the staging table exists. */
  stageCreated: boolean;
  /** Upsert: the order of rows, so the last record of a key wins. */
  nextSeq: number;
}

/** One batch ready to send: COPY text for a table write, the records themselves for a custom `write`. */
type OutgoingBatch =
  | {
      readonly kind: "copy";
      readonly rows: number;
      readonly columns: readonly string[];
      readonly text: string[];
    }
  | { readonly kind: "records"; readonly rows: number; readonly records: unknown[] };

/** Everything decided once at start: mode, table layout, epoch. */
interface Setup {
  readonly pool: PoolHandle;
  readonly mode: "prepared" | "staging";
  readonly sinkId: string;
  readonly subtask: number;
  readonly epoch: number;
  readonly control: ControlTables;
  readonly target?: TargetTable;
}

interface TargetTable {
  readonly table: TableName;
  readonly columns: readonly string[];
  readonly encodings: readonly ColumnEncoding[];
  readonly upsert?: {
    readonly conflictColumns: readonly string[];
    readonly updateColumns: readonly string[];
  };
  /** Prepared-mode upserts: rows of the open transaction wait here (never a temporary table: it could not be prepared). */
  readonly scratch?: TableName;
}

const SEQ_COLUMN = "__onceflow_seq";
const SINK_ID = /^[A-Za-z0-9_.:]{1,150}$/;
/** Sinks of this process, by `sinkId/subtask`: two with the same id would roll back each other's work. */
const activeSinks = new Set<string>();

/** Only the durable fields go into checkpoints, as JSON (readable with `onceflow checkpoints inspect`). */
const transactionSerializer: TypeSerializer<PostgresTransaction> = {
  serialize: (txn) =>
    Buffer.from(
      JSON.stringify({
        mode: txn.mode,
        sinkId: txn.sinkId,
        subtask: txn.subtask,
        epoch: txn.epoch,
        sequence: txn.sequence,
        rows: txn.rows,
        checkpointId: txn.checkpointId,
        gid: txn.gid,
        stageTable: txn.stageTable,
      }),
    ),
  deserialize: (bytes) => JSON.parse(bytes.toString("utf8")) as PostgresTransaction,
};

/**
 * The default sink id: `<jobId>.<operatorUid>`, with characters other than letters, digits, `_`,
 * `.` and `:` replaced by `_` (plus a short hash of the original when anything was replaced, so two
 * ids that differ only there stay apart).
 *
 * @example
 * ```ts
 * defaultSinkId("orders", "out"); // "orders.out"
 * defaultSinkId("g2-pg", "out"); // "g2_pg.out_4f1c2a"
 * ```
 */
export function defaultSinkId(jobId: string, operatorUid: string): string {
  const raw = `${jobId}.${operatorUid}`;
  const safe = raw.replace(/[^A-Za-z0-9_.:]/g, "_");
  const id = safe === raw ? raw : `${safe}_${shortHash(raw, 6)}`;
  return id.length <= 150 ? id : `${id.slice(0, 137)}_${shortHash(raw, 12)}`;
}

/**
 * An exactly-once sink into PostgreSQL — the counterpart of Flink's `JdbcSink.exactlyOnceSink`,
 * built on onceflow's {@link TwoPhaseCommitSink}. Rows of each checkpoint interval become visible
 * together, once, when the checkpoint completes, whatever crashes in between.
 *
 * Two modes (see {@link PostgresSinkMode}): `prepared` (`PREPARE TRANSACTION` per checkpoint,
 * `COMMIT PREPARED` on completion) and `staging` (a staging table per checkpoint, moved into the
 * target in one transaction on completion). `auto` picks `prepared` when the server has
 * `max_prepared_transactions > 0` and logs the choice.
 *
 * Every commit writes a marker row (sink, subtask, checkpoint) in the same transaction, so a
 * commit replayed after a crash is recognised, and a gid that vanished without a marker is
 * reported as lost data, never ignored. An epoch per (sink, subtask), raised at every start, fences
 * zombie processes.
 *
 * @example
 * ```ts
 * import { Job, GeneratorSource } from "@onceflow/core";
 * import { PostgresSink } from "@onceflow/connector-postgres";
 *
 * const sink = new PostgresSink<{ id: number; payload: string }>({
 *   connection: "postgresql://postgres@localhost:5432/app",
 *   table: "events",
 *   columns: ["id", "payload"],
 *   toRow: (event) => [event.id, event.payload],
 *   operation: { type: "upsert", conflictColumns: ["id"] },
 * });
 * job.fromSource(source, { uid: "in" }).sinkTo(sink, { uid: "out" });
 * ```
 */
export class PostgresSink<IN> extends TwoPhaseCommitSink<IN, PostgresTransaction> {
  private readonly options: PostgresSinkOptions<IN>;
  private readonly batchSize: number;
  private readonly lockTimeout: number;
  private readonly markerRetention: number;
  private readonly requestedMode: PostgresSinkMode;
  private readonly handles = new WeakMap<PostgresTransaction, OpenHandle>();
  private setupPromise: Promise<Setup> | undefined;
  private setupDone: Setup | undefined;
  private sequence = 0;
  private registered: string | undefined;
  private released = false;

  constructor(options: PostgresSinkOptions<IN>) {
    super({
      name: options.name ?? "PostgresSink",
      transactionSerializer,
      commitRetry: options.commitRetry,
      backgroundCommits: options.backgroundCommits ?? false,
    });
    this.options = options;
    this.requestedMode = options.mode ?? "auto";
    if (!["prepared", "staging", "auto"].includes(this.requestedMode)) {
      throw invalid(
        "mode",
        `must be 'prepared', 'staging' or 'auto', got ${JSON.stringify(this.requestedMode)}`,
      );
    }
    this.batchSize = positiveInteger("batchSize", options.batchSize ?? 5000);
    this.lockTimeout = positiveInteger("lockTimeout", options.lockTimeout ?? 10_000);
    this.markerRetention = positiveInteger("markerRetention", options.markerRetention ?? 100);
    if (options.sinkId !== undefined) checkSinkId(options.sinkId);
    if (options.write !== undefined) {
      if (typeof options.write !== "function")
        throw invalid("write", "must be a function (client, rows) => Promise<void>");
      if (this.requestedMode === "staging") {
        throw invalid(
          "write",
          "a custom write needs mode 'prepared' (or 'auto' on a server with prepared transactions): in staging mode the sink moves rows into a table it knows; give 'table' and 'columns' instead",
        );
      }
    } else {
      checkTableOptions(options);
    }
  }

  /**
   * The mode in use once the sink started (`undefined` before).
   *
   * @example
   * ```ts
   * sink.activeMode; // "staging" on a server with max_prepared_transactions = 0
   * ```
   */
  get activeMode(): "prepared" | "staging" | undefined {
    return this.setupDone?.mode;
  }

  // ---- TwoPhaseCommitSink -----------------------------------------------------------------------

  protected override async beginTransaction(): Promise<PostgresTransaction> {
    const setup = await this.ready();
    const sequence = this.sequence++;
    const txn: PostgresTransaction = {
      mode: setup.mode,
      sinkId: setup.sinkId,
      subtask: setup.subtask,
      epoch: setup.epoch,
      sequence,
      rows: 0,
    };
    if (setup.mode === "staging") txn.stageTable = stageTableName(setup, setup.epoch, sequence);
    this.handles.set(txn, { buffer: [], stageCreated: false, nextSeq: 0 });
    return txn;
  }

  protected override async invoke(txn: PostgresTransaction, value: IN): Promise<void> {
    const handle = this.handleOf(txn);
    handle.buffer.push(this.rowOf(value));
    if (handle.buffer.length >= this.batchSize) await this.flush(txn, handle);
  }

  protected override async invokeBatch(
    txn: PostgresTransaction,
    values: readonly IN[],
    _context: SinkContext,
  ): Promise<void> {
    const handle = this.handleOf(txn);
    for (const value of values) {
      handle.buffer.push(this.rowOf(value));
      if (handle.buffer.length >= this.batchSize) await this.flush(txn, handle);
    }
  }

  protected override async preCommit(
    txn: PostgresTransaction,
    checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    const setup = await this.ready();
    const handle = this.handleOf(txn);
    await this.flush(txn, handle);
    await this.settle(handle);
    txn.checkpointId = checkpoint.checkpointId;
    if (setup.mode === "prepared") await this.prepare(setup, txn, handle, checkpoint.checkpointId);
    // Staging: every batch is already committed into the staging table; nothing else to make durable.
  }

  protected override async commit(txn: PostgresTransaction): Promise<void> {
    const setup = await this.ready();
    if (txn.mode === "prepared") await this.commitPrepared(setup, txn);
    else await this.moveStaged(setup, txn);
  }

  protected override async recoverAndCommit(txn: PostgresTransaction): Promise<void> {
    const setup = await this.ready();
    this.checkOwnTransaction(setup, txn);
    await this.commit(txn);
  }

  protected override async abort(txn: PostgresTransaction): Promise<void> {
    const setup = await this.ready();
    const handle = this.handles.get(txn);
    if (handle !== undefined) {
      handle.buffer = [];
      await this.settle(handle).catch(() => undefined);
    }
    if (handle?.client !== undefined) {
      const client = handle.client;
      handle.client = undefined;
      let broken: unknown = handle.clientError;
      try {
        if (broken === undefined) await client.query("ROLLBACK");
      } catch (error) {
        broken = error;
      } finally {
        handle.detach?.();
        client.release(broken === undefined ? undefined : true);
      }
    }
    if (txn.gid !== undefined) await this.rollbackPrepared(setup, [txn.gid]);
    if (txn.stageTable !== undefined) {
      await setup.pool.pool.query(
        `DROP TABLE IF EXISTS ${tableName(this.targetSchema(), txn.stageTable).sql}`,
      );
    }
  }

  protected override async recoverAndAbort(txn: PostgresTransaction): Promise<void> {
    const setup = await this.ready();
    this.checkOwnTransaction(setup, txn);
    await this.abort(txn);
  }

  /**
   * Rolls back every other prepared transaction and drops every staging table that this subtask —
   * or an old subtask it took over after the parallelism went down — left behind, and fences the
   * taken-over subtasks' zombies by starting a new epoch for them too.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    const setup = await this.ready();
    const pool = setup.pool.pool;
    for (const subtask of this.recoveredSubtaskIndexes()) {
      if (subtask !== setup.subtask) {
        const client = await pool.connect();
        try {
          await setup.control.bumpEpoch(client, setup.sinkId, subtask, this.lockTimeout);
        } finally {
          client.release();
        }
      }
      await this.rollBackLeftovers(setup, subtask);
    }
    if (this.lastCheckpointId === 0) {
      // A fresh start begins a new history: its checkpoint ids start again from 1.
      await setup.control.forgetAfter(pool, setup.sinkId, setup.subtask, undefined);
    }
  }

  private async rollBackLeftovers(setup: Setup, subtask: number): Promise<void> {
    const pool = setup.pool.pool;
    const prefix = `${setup.sinkId}-${subtask}-`;
    const leftovers = await pool.query<{ gid: string; here: boolean }>(
      `SELECT gid, database = current_database() AS here FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1`,
      [prefix],
    );
    const here = leftovers.rows.filter((row) => row.here).map((row) => row.gid);
    const elsewhere = leftovers.rows.filter((row) => !row.here).map((row) => row.gid);
    if (elsewhere.length > 0) {
      this.logger.warn(
        { gids: elsewhere },
        "prepared transactions with this sink's gid prefix exist in another database; they cannot be rolled back from here (two sinks sharing a sinkId?)",
      );
    }
    if (here.length > 0) {
      this.logger.info(
        { gids: here, subtask },
        "rolling back prepared transactions left by an earlier attempt",
      );
      await this.rollbackPrepared(setup, here);
    }
    const stagePrefix = stageTablePrefix({ sinkId: setup.sinkId, subtask });
    const stages = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind = 'r' AND left(c.relname, length($2)) = $2`,
      [this.targetSchema(), stagePrefix],
    );
    for (const { name } of stages.rows) {
      this.logger.info({ table: name, subtask }, "dropping a staging table left by an earlier attempt");
      await pool.query(`DROP TABLE IF EXISTS ${tableName(this.targetSchema(), name).sql}`);
    }
  }

  protected override describeTransaction(txn: PostgresTransaction): string {
    if (txn.gid !== undefined) return `gid '${txn.gid}'`;
    if (txn.stageTable !== undefined) return `staging table ${txn.stageTable}`;
    return `${txn.sinkId}-${txn.subtask} transaction #${txn.sequence} (epoch ${txn.epoch})`;
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    if (error instanceof TransactionError) {
      if (error.code === "TRANSACTION_TIMED_OUT") return "timed-out";
      if (error.code === "TRANSACTION_FENCED") return "fenced";
      return "fatal";
    }
    if (error instanceof ConfigurationError) return "fatal";
    if (isTransient(error)) return "retry";
    if (sqlState(error) === SqlState.insufficientPrivilege) return "fatal";
    return "retry";
  }

  /**
   * Aborts the open transaction (as every TwoPhaseCommitSink does), then returns the connections.
   * Pending prepared transactions stay prepared: their checkpoint may still complete or be restored.
   *
   * @example
   * ```ts
   * await sink.close();
   * ```
   */
  override async close(): Promise<void> {
    // First: a close that hangs on a dead connection must not keep the sink id from the next attempt.
    if (this.registered !== undefined) activeSinks.delete(this.registered);
    this.registered = undefined;
    try {
      await super.close();
    } finally {
      if (!this.released) {
        this.released = true;
        const setup = this.setupDone;
        if (setup?.pool.owned) await setup.pool.pool.end().catch(() => {});
        else if (setup === undefined && this.setupPromise !== undefined) {
          await this.setupPromise.then(
            (late) => (late.pool.owned ? late.pool.pool.end() : undefined),
            () => undefined,
          );
        }
      }
    }
  }

  // ---- setup ------------------------------------------------------------------------------------

  private ready(): Promise<Setup> {
    this.setupPromise ??= this.start();
    return this.setupPromise;
  }

  private async start(): Promise<Setup> {
    const context = this.runtimeContext;
    const options = this.options;
    const sinkId = options.sinkId ?? defaultSinkId(context.jobId, context.operatorUid);
    checkSinkId(sinkId);
    const key = `${sinkId}/${context.subtaskIndex}`;
    if (activeSinks.has(key)) {
      throw new PostgresConfigurationError(
        "sinkId",
        PostgresErrorReason.invalidSinkId,
        `sink id "${sinkId}" is already used by another PostgresSink of subtask ${context.subtaskIndex} in this process: give each sink its own 'sinkId' (or its own operator uid)`,
      );
    }
    activeSinks.add(key);
    this.registered = key;
    const pool = openPool(options, this.logger);
    try {
      if (!pool.owned && (pool.pool.options.max ?? 10) < 2) {
        throw invalid(
          "pool",
          "needs room for at least 2 connections (one holds the open transaction, one commits)",
        );
      }
      const client = await pool.pool.connect();
      try {
        const setup = await this.inspect(client, pool, sinkId, context.subtaskIndex);
        this.setupDone = setup;
        return setup;
      } finally {
        client.release();
      }
    } catch (error) {
      if (pool.owned) await pool.pool.end().catch(() => {});
      this.setupPromise = undefined;
      activeSinks.delete(key);
      this.registered = undefined;
      throw error;
    }
  }

  private async inspect(
    client: PoolClient,
    pool: PoolHandle,
    sinkId: string,
    subtask: number,
  ): Promise<Setup> {
    const setting = await client.query<{ value: string }>(
      "SELECT current_setting('max_prepared_transactions') AS value",
    );
    const maxPrepared = Number(setting.rows[0]?.value ?? 0);
    const mode = this.resolveMode(maxPrepared, pool.where);
    const control = new ControlTables(
      this.options.controlSchema ?? this.targetSchema(),
      this.options.markerTable ?? "onceflow_sink_markers",
      this.options.epochTable ?? "onceflow_sink_epochs",
    );
    const target =
      this.options.table === undefined ? undefined : await this.inspectTarget(client, mode, sinkId, subtask);
    await control.ensure(client);
    const epoch = await control.bumpEpoch(client, sinkId, subtask, this.lockTimeout);
    const message =
      this.requestedMode === "auto"
        ? `PostgresSink mode 'auto' chose '${mode}' (max_prepared_transactions = ${maxPrepared} on ${pool.where})`
        : `PostgresSink uses mode '${mode}'`;
    this.logger.info({ mode, sinkId, epoch, maxPreparedTransactions: maxPrepared }, message);
    return { pool, mode, sinkId, subtask, epoch, control, ...(target === undefined ? {} : { target }) };
  }

  private resolveMode(maxPrepared: number, where: string): "prepared" | "staging" {
    if (this.requestedMode === "staging") return "staging";
    if (maxPrepared > 0) return "prepared";
    if (this.requestedMode === "auto") {
      if (this.options.write !== undefined) {
        throw new PostgresConfigurationError(
          "write",
          PostgresErrorReason.preparedTransactionsDisabled,
          `the server at ${where} has max_prepared_transactions = 0, so mode 'auto' would use staging, which cannot run a custom write: set max_prepared_transactions > 0 on the server (postgresql.conf or ALTER SYSTEM, then restart it), or give 'table' and 'columns' instead of 'write'`,
        );
      }
      return "staging";
    }
    throw new PostgresConfigurationError(
      "mode",
      PostgresErrorReason.preparedTransactionsDisabled,
      `mode 'prepared' needs prepared transactions, but the server at ${where} has max_prepared_transactions = 0. Either set max_prepared_transactions to at least twice the number of sink subtasks (ALTER SYSTEM SET max_prepared_transactions = 64; then restart PostgreSQL — it cannot change without a restart), or use mode 'staging' (or 'auto', which picks staging on such servers)`,
    );
  }

  private async inspectTarget(
    client: PoolClient,
    mode: "prepared" | "staging",
    sinkId: string,
    subtask: number,
  ): Promise<TargetTable> {
    const options = this.options as PostgresSinkTableOptions<IN>;
    const table = tableName(this.targetSchema(), options.table);
    const operation = options.operation ?? { type: "insert" };
    const schema = await readTableSchema(
      client,
      table,
      operation.type === "upsert"
        ? ["INSERT", "UPDATE", "SELECT"]
        : mode === "staging"
          ? ["INSERT", "SELECT"]
          : ["INSERT"],
    );
    const infos = checkColumns(schema, options.columns);
    const encodings = infos.map((info) => info.encoding);
    if (operation.type !== "upsert") return { table, columns: options.columns, encodings };
    await checkUniqueIndex(client, schema, operation.conflictColumns);
    const updateColumns =
      operation.updateColumns ??
      options.columns.filter((column) => !operation.conflictColumns.includes(column));
    const upsert = { conflictColumns: operation.conflictColumns, updateColumns };
    if (mode === "staging") return { table, columns: options.columns, encodings, upsert };
    // Created once and kept: dropping it could wait on a prepared transaction that still uses it.
    const scratch = tableName(this.targetSchema(), `onceflow_scratch_${shortHash(sinkId)}_${subtask}`);
    try {
      await client.query(
        `CREATE UNLOGGED TABLE IF NOT EXISTS ${scratch.sql} AS SELECT 0::bigint AS ${quote(SEQ_COLUMN)}, ${options.columns
          .map(quote)
          .join(", ")} FROM ${table.sql} WITH NO DATA`,
      );
    } catch (error) {
      const state = sqlState(error);
      if (state !== SqlState.uniqueViolation && state !== SqlState.duplicateTable) {
        throw asPermissionError(error, "schema", `creating the scratch table ${scratch.sql}`);
      }
    }
    return { table, columns: options.columns, encodings, upsert, scratch };
  }

  private targetSchema(): string {
    return (this.options as PostgresSinkTableOptions<IN>).schema ?? "public";
  }

  // ---- writing ----------------------------------------------------------------------------------

  private handleOf(txn: PostgresTransaction): OpenHandle {
    const handle = this.handles.get(txn);
    if (handle === undefined) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${this.name}: ${this.describeTransaction(txn)} is not open in this process`,
      );
    }
    return handle;
  }

  private rowOf(value: IN): unknown {
    const options = this.options;
    if (options.write !== undefined) return value;
    const row = options.toRow === undefined ? (value as unknown) : options.toRow(value);
    if (Array.isArray(row)) {
      if (row.length !== options.columns.length) {
        throw invalid(
          "toRow",
          `returned ${row.length} values for ${options.columns.length} columns (${options.columns.join(", ")})`,
        );
      }
      return row;
    }
    if (typeof row !== "object" || row === null) {
      throw invalid(
        "toRow",
        `must return an array (in 'columns' order) or an object keyed by column, got ${typeof row}`,
      );
    }
    const record = row as Record<string, unknown>;
    return options.columns.map((column) => record[column]);
  }

  /**
   * Sends the buffered rows. One batch stays in flight while the next is collected and encoded, so
   * encoding and the server's work overlap; memory stays at two batches. A failure surfaces at the
   * next flush or at the pre-commit, which waits for the last batch.
   */
  private async flush(txn: PostgresTransaction, handle: OpenHandle): Promise<void> {
    const records = handle.buffer;
    handle.buffer = [];
    const batch =
      records.length === 0 ? undefined : this.encode(this.setupDone ?? (await this.ready()), handle, records);
    await this.settle(handle);
    if (batch === undefined) return;
    const sending = this.send(txn, handle, batch);
    // Observed here so a failure never becomes an unhandled rejection; settle() rethrows it.
    sending.catch(() => undefined);
    handle.inFlight = sending;
  }

  /** Waits for the batch in flight, rethrowing its failure. */
  private async settle(handle: OpenHandle): Promise<void> {
    const inFlight = handle.inFlight;
    if (inFlight === undefined) return;
    try {
      await inFlight;
    } finally {
      handle.inFlight = undefined;
    }
  }

  /** COPY text for a table write (upserts numbered, so the last record of a key wins); records as they are for a custom write. */
  private encode(setup: Setup, handle: OpenHandle, records: unknown[]): OutgoingBatch {
    const target = setup.target;
    if (target === undefined) return { kind: "records", rows: records.length, records };
    const rows = records as unknown[][];
    if (target.upsert === undefined) {
      const text = encodeCopyText(rows, target.encodings);
      return { kind: "copy", rows: rows.length, columns: target.columns, text };
    }
    let seq = handle.nextSeq;
    handle.nextSeq += rows.length;
    const text = encodeCopyText(
      rows.map((row) => [seq++, ...row]),
      ["scalar", ...target.encodings],
    );
    return { kind: "copy", rows: rows.length, columns: [SEQ_COLUMN, ...target.columns], text };
  }

  private async send(txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch): Promise<void> {
    const setup = await this.ready();
    if (setup.mode === "prepared") {
      const client = await this.transactionClient(setup, handle);
      const target = setup.target;
      try {
        if (batch.kind === "records") await this.options.write?.(client, batch.records as IN[]);
        else if (target !== undefined) {
          // Upserts go to the scratch table first and are merged at pre-commit.
          const into = target.upsert === undefined ? target.table : target.scratch!;
          await copyText(client, into, batch.columns, batch.text);
        }
      } catch (error) {
        handle.clientError ??= error instanceof Error ? error : new Error(String(error));
        throw asPermissionError(error, "table", `writing into ${target?.table.sql ?? "the custom write"}`);
      }
    } else {
      const target = setup.target!;
      const stage = tableName(this.targetSchema(), txn.stageTable!);
      const client = await setup.pool.pool.connect();
      let broken: unknown;
      try {
        if (!handle.stageCreated) {
          const seq = target.upsert === undefined ? "" : `0::bigint AS ${quote(SEQ_COLUMN)}, `;
          await client.query(
            `CREATE TABLE IF NOT EXISTS ${stage.sql} AS SELECT ${seq}${target.columns.map(quote).join(", ")} FROM ${target.table.sql} WITH NO DATA`,
          );
          handle.stageCreated = true;
        }
        if (batch.kind === "copy") await copyText(client, stage, batch.columns, batch.text);
      } catch (error) {
        broken = error;
        throw asPermissionError(error, "schema", `staging rows in ${stage.sql}`);
      } finally {
        client.release(broken === undefined ? undefined : true);
      }
    }
    txn.rows += batch.rows;
  }

  /** The connection holding the open prepared-mode transaction, begun on the first row. */
  private async transactionClient(setup: Setup, handle: OpenHandle): Promise<PoolClient> {
    if (handle.clientError !== undefined) throw handle.clientError;
    if (handle.client !== undefined) return handle.client;
    const client = await setup.pool.pool.connect();
    // A connection lost while idle in the transaction must fail the transaction, not the process.
    const onError = (error: Error) => {
      handle.clientError ??= error;
    };
    client.on("error", onError);
    handle.detach = () => client.off("error", onError);
    try {
      await client.query("BEGIN");
      await client.query(`SET LOCAL lock_timeout = ${this.lockTimeout}`);
    } catch (error) {
      handle.detach?.();
      client.release(true);
      throw error;
    }
    handle.client = client;
    return client;
  }

  /** Upsert merge, epoch check, marker, `PREPARE TRANSACTION` (checking its command tag), release. */
  private async prepare(setup: Setup, txn: PostgresTransaction, handle: OpenHandle, checkpointId: number) {
    if (handle.client === undefined) return; // Nothing was written: nothing to prepare.
    if (handle.clientError !== undefined) throw handle.clientError;
    const client = handle.client;
    const target = setup.target;
    try {
      if (target?.upsert !== undefined && target.scratch !== undefined) {
        await client.query(upsertStatement(target, target.scratch));
        // Only this transaction's rows are visible to it; the others' are invisible and untouched.
        await client.query(`DELETE FROM ${target.scratch.sql}`);
      }
      await setup.control.checkEpoch(client, setup.sinkId, setup.subtask, txn.epoch, checkpointId, false);
      await this.insertMarker(setup, client, txn, checkpointId);
      const gid = `${setup.sinkId}-${setup.subtask}-${checkpointId}`;
      await prepareTransaction(client, gid, checkpointId, this.name);
      txn.gid = gid;
      handle.client = undefined;
      handle.detach?.();
      client.release();
    } catch (error) {
      handle.clientError ??= error instanceof Error ? error : new Error(String(error));
      if (sqlState(error) === SqlState.duplicateObject) {
        throw new TransactionError(
          "TRANSACTION_FENCED",
          `${this.name}: gid '${setup.sinkId}-${setup.subtask}-${checkpointId}' is already prepared by someone else: another process uses sinkId "${setup.sinkId}" for subtask ${setup.subtask}. Stop it, or give the sinks distinct sinkIds`,
          { checkpointId, cause: error },
        );
      }
      if (sqlState(error) === SqlState.inFailedTransaction) {
        throw new CheckpointError(
          "CHECKPOINT_FAILED",
          `${this.name}: the transaction of checkpoint ${checkpointId} had already failed (a statement inside it raised, for example in a custom write that caught the error) and cannot be prepared; the checkpoint fails and the job restarts from the previous one`,
          { checkpointId, cause: error },
        );
      }
      if (sqlState(error) === SqlState.objectNotInPrerequisiteState) {
        throw new PostgresConfigurationError(
          "mode",
          PostgresErrorReason.preparedTransactionsDisabled,
          `PREPARE TRANSACTION failed: ${messageOf(error)}. Raise max_prepared_transactions on the server (then restart it), or use mode 'staging'`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  private async insertMarker(
    setup: Setup,
    client: PoolClient,
    txn: PostgresTransaction,
    checkpointId: number,
  ) {
    // The transaction's own subtask: after a rescale, another subtask may be the one committing it.
    try {
      await setup.control.insertMarker(client, setup.sinkId, txn.subtask, checkpointId, txn.epoch, txn.rows);
    } catch (error) {
      if (sqlState(error) !== SqlState.uniqueViolation) throw error;
      throw new TransactionError(
        "TRANSACTION_FENCED",
        `${this.name}: checkpoint ${checkpointId} of sink "${setup.sinkId}" subtask ${txn.subtask} is already committed (its marker exists), by another process or an earlier run that got further than the checkpoint this one restored. Restart so that the job restores the latest checkpoint; if you restored an older checkpoint on purpose, delete the newer markers: DELETE FROM ${setup.control.markers.sql} WHERE sink_id = '${setup.sinkId}' AND checkpoint_id >= ${checkpointId}`,
        { checkpointId, transactionId: `${setup.sinkId}-${txn.subtask}-${checkpointId}`, cause: error },
      );
    }
    await setup.control.prune(client, setup.sinkId, txn.subtask, checkpointId, this.markerRetention);
  }

  // ---- committing -------------------------------------------------------------------------------

  /** `COMMIT PREPARED` on its own connection with `lock_timeout`; a 42704 is resolved through the marker. */
  private async commitPrepared(setup: Setup, txn: PostgresTransaction): Promise<void> {
    const gid = txn.gid;
    if (gid === undefined) return; // An empty transaction was never prepared.
    const client = await setup.pool.pool.connect();
    let broken: unknown;
    try {
      await client.query(`SET lock_timeout = ${this.lockTimeout}`);
      try {
        await client.query(`COMMIT PREPARED ${literal(gid)}`);
      } catch (error) {
        if (sqlState(error) !== SqlState.undefinedObject) throw error;
        await this.resolveMissing(setup, client, txn, gid, error);
      }
      await client.query("RESET lock_timeout");
    } catch (error) {
      broken = error;
      throw error;
    } finally {
      client.release(broken === undefined ? undefined : true);
    }
  }

  /** The gid is gone: committed earlier (marker present) or lost (no marker) — never silently. */
  private async resolveMissing(
    setup: Setup,
    client: PoolClient,
    txn: PostgresTransaction,
    what: string,
    cause: unknown,
  ): Promise<void> {
    const checkpointId = txn.checkpointId ?? -1;
    const marker = await client.query<{ epoch: string }>(
      `SELECT epoch::text FROM ${setup.control.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id = $3`,
      [txn.sinkId, txn.subtask, checkpointId],
    );
    const epoch = marker.rows[0]?.epoch;
    if (epoch !== undefined && Number(epoch) === txn.epoch) {
      this.logger.debug({ checkpointId, transaction: what }, "already committed (its marker exists)");
      return;
    }
    if (epoch !== undefined) {
      throw new TransactionError(
        "TRANSACTION_FENCED",
        `${this.name}: ${what} of checkpoint ${checkpointId} is gone, and checkpoint ${checkpointId} was committed by another process of sink "${txn.sinkId}" (epoch ${epoch}, this transaction has ${txn.epoch}): this process was fenced and must stop`,
        { checkpointId, transactionId: what, cause },
      );
    }
    throw new TransactionError(
      "TRANSACTION_TIMED_OUT",
      `${this.name}: ${what} of checkpoint ${checkpointId} is gone and no marker for checkpoint ${checkpointId} exists in ${setup.control.markers.sql}: it was rolled back (ROLLBACK PREPARED by hand, or by another process using sinkId "${txn.sinkId}"), so the ${txn.rows} rows of checkpoint ${checkpointId} are LOST. Check pg_prepared_xacts and the server log; to recover them, replay the input of checkpoint ${checkpointId}`,
      { checkpointId, transactionId: what, cause },
    );
  }

  private async rollbackPrepared(setup: Setup, gids: readonly string[]): Promise<void> {
    for (const gid of gids) {
      try {
        await setup.pool.pool.query(`ROLLBACK PREPARED ${literal(gid)}`);
      } catch (error) {
        if (sqlState(error) !== SqlState.undefinedObject) throw error; // Already gone: fine.
      }
    }
  }

  /**
   * Staging mode's commit: in one transaction, check the epoch, skip a replay (marker present),
   * move the staged rows into the target, write the marker, drop the staging table.
   */
  private async moveStaged(setup: Setup, txn: PostgresTransaction): Promise<void> {
    if (txn.rows === 0 || txn.stageTable === undefined) return;
    const checkpointId = txn.checkpointId ?? -1;
    const target = setup.target!;
    const stage = tableName(this.targetSchema(), txn.stageTable);
    const client = await setup.pool.pool.connect();
    let broken: unknown;
    try {
      await client.query("BEGIN");
      await client.query(`SET LOCAL lock_timeout = ${this.lockTimeout}`);
      await setup.control.checkEpoch(client, setup.sinkId, setup.subtask, setup.epoch, checkpointId, true);
      const marker = await client.query<{ epoch: string }>(
        `SELECT epoch::text FROM ${setup.control.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id = $3`,
        [txn.sinkId, txn.subtask, checkpointId],
      );
      const markerEpoch = marker.rows[0]?.epoch;
      if (markerEpoch !== undefined && Number(markerEpoch) === txn.epoch) {
        // A replay: moved before the crash. Only the staging table may be left.
        await client.query(`DROP TABLE IF EXISTS ${stage.sql}`);
        await client.query("COMMIT");
        return;
      }
      if (markerEpoch !== undefined) {
        throw new TransactionError(
          "TRANSACTION_FENCED",
          `${this.name}: checkpoint ${checkpointId} of sink "${txn.sinkId}" subtask ${txn.subtask} was already committed by another process (epoch ${markerEpoch}, these rows were staged in epoch ${txn.epoch}); restart so that the job restores the latest checkpoint`,
          { checkpointId, transactionId: txn.stageTable, cause: undefined },
        );
      }
      const exists = await client.query<{ oid: string | null }>("SELECT to_regclass($1)::text AS oid", [
        stage.sql,
      ]);
      if (exists.rows[0]?.oid == null) {
        throw new TransactionError(
          "TRANSACTION_TIMED_OUT",
          `${this.name}: the staging table ${stage.sql} of checkpoint ${checkpointId} is gone and no marker for checkpoint ${checkpointId} exists: it was dropped (by hand, or by another process using sinkId "${txn.sinkId}"), so the ${txn.rows} rows of checkpoint ${checkpointId} are LOST; replay its input to recover them`,
          { checkpointId, transactionId: txn.stageTable },
        );
      }
      const moved =
        target.upsert === undefined
          ? await client.query(
              `INSERT INTO ${target.table.sql} (${target.columns.map(quote).join(", ")}) SELECT ${target.columns
                .map(quote)
                .join(", ")} FROM ${stage.sql}`,
            )
          : await client.query(upsertStatement(target, stage));
      if (target.upsert === undefined && moved.rowCount !== txn.rows) {
        throw new TransactionError(
          "COMMIT_FAILED",
          `${this.name}: the staging table ${stage.sql} of checkpoint ${checkpointId} holds ${moved.rowCount} rows, but ${txn.rows} were staged: it was changed behind the sink's back; nothing was committed`,
          { checkpointId, transactionId: txn.stageTable },
        );
      }
      await this.insertMarker(setup, client, txn, checkpointId);
      await client.query(`DROP TABLE ${stage.sql}`);
      await client.query("COMMIT");
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        broken = rollbackError;
      });
      if (isTransient(error)) broken = error;
      throw error;
    } finally {
      client.release(broken === undefined ? undefined : true);
    }
  }

  private checkOwnTransaction(setup: Setup, txn: PostgresTransaction): void {
    if (txn.sinkId !== setup.sinkId) {
      throw new PostgresConfigurationError(
        "sinkId",
        PostgresErrorReason.invalidSinkId,
        `the restored checkpoint holds a transaction of sink "${txn.sinkId}", but this sink's id is "${setup.sinkId}": keep 'sinkId' (and the job id and operator uid it defaults from) stable across restarts`,
      );
    }
  }
}

function upsertStatement(target: TargetTable, from: TableName): string {
  const upsert = target.upsert!;
  const columns = target.columns.map(quote).join(", ");
  const keys = upsert.conflictColumns.map(quote).join(", ");
  const action =
    upsert.updateColumns.length === 0
      ? "DO NOTHING"
      : `DO UPDATE SET ${upsert.updateColumns.map((column) => `${quote(column)} = EXCLUDED.${quote(column)}`).join(", ")}`;
  // DISTINCT ON keeps the last row of each key: ON CONFLICT may not touch one row twice (21000).
  return `INSERT INTO ${target.table.sql} (${columns})
          SELECT DISTINCT ON (${keys}) ${columns} FROM ${from.sql} ORDER BY ${keys}, ${quote(SEQ_COLUMN)} DESC
          ON CONFLICT (${keys}) ${action}`;
}

function stageTablePrefix(setup: Pick<Setup, "sinkId" | "subtask">): string {
  return `onceflow_stage_${shortHash(setup.sinkId)}_${setup.subtask}_`;
}

function stageTableName(setup: Pick<Setup, "sinkId" | "subtask">, epoch: number, sequence: number): string {
  return `${stageTablePrefix(setup)}${epoch}_${sequence}`;
}

function invalid(setting: string, problem: string): PostgresConfigurationError {
  return new PostgresConfigurationError(setting, PostgresErrorReason.invalidOption, problem);
}

function positiveInteger(setting: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw invalid(setting, `must be a whole number of at least 1, got ${value}`);
  return value;
}

function checkSinkId(sinkId: string): void {
  if (typeof sinkId !== "string" || !SINK_ID.test(sinkId)) {
    throw new PostgresConfigurationError(
      "sinkId",
      PostgresErrorReason.invalidSinkId,
      `${JSON.stringify(sinkId)} is not usable: use 1–150 letters, digits, '_', '.' or ':' (no '-', which separates the subtask and checkpoint in gids, and gids must stay under 200 bytes)`,
    );
  }
}

function checkTableOptions<IN>(options: PostgresSinkTableOptions<IN>): void {
  if (typeof options.table !== "string" || options.table.length === 0) {
    throw invalid("table", "give the target table's name (or a custom 'write' function)");
  }
  if (!Array.isArray(options.columns) || options.columns.length === 0) {
    throw invalid("columns", "give the columns to write, in the order toRow returns them");
  }
  if (new Set(options.columns).size !== options.columns.length)
    throw invalid("columns", "lists a column twice");
  if (options.columns.includes(SEQ_COLUMN))
    throw invalid("columns", `"${SEQ_COLUMN}" is reserved by the sink`);
  if (options.toRow !== undefined && typeof options.toRow !== "function")
    throw invalid("toRow", "must be a function");
  const operation = options.operation ?? { type: "insert" };
  if (operation.type === "upsert") {
    if (!Array.isArray(operation.conflictColumns) || operation.conflictColumns.length === 0) {
      throw invalid(
        "operation.conflictColumns",
        "an upsert needs the columns of a unique index or constraint",
      );
    }
    for (const column of [...operation.conflictColumns, ...(operation.updateColumns ?? [])]) {
      if (!options.columns.includes(column)) {
        throw invalid("operation", `column "${column}" is not in 'columns' (${options.columns.join(", ")})`);
      }
    }
  } else if (operation.type !== "insert") {
    throw invalid(
      "operation",
      `type must be 'insert' or 'upsert', got ${JSON.stringify((operation as { type: unknown }).type)}`,
    );
  }
}
