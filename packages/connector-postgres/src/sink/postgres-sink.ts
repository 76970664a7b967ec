import {
  CheckpointError,
  type CommitErrorClassification,
  type FunctionSnapshotContext,
  isOnceflowError,
  type SinkContext,
  TransactionError,
  TwoPhaseCommitSink,
  type TypeSerializer,
} from "@onceflow/core";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { CopyTextBuffer } from "../sql/copy-buffer.js";
import { shortHash } from "../sql/identifiers.js";
import { isTransient, SqlState, sqlState } from "../sql/pg-errors.js";
import { withClient } from "../sql/pool.js";
import { rollBackLeftovers, subtasksWithLeftovers } from "./leftovers.js";
import type { PostgresSinkMode, PostgresSinkOptions, PostgresSinkTableOptions } from "./options.js";
import { PreparedMode } from "./prepared-mode.js";
import {
  type OpenHandle,
  type OutgoingBatch,
  type PostgresTransaction,
  SEQ_COLUMN,
  type SinkMode,
  type SinkSetup,
  type TargetTable,
} from "./sink-mode.js";
import { startSinkSetup } from "./sink-setup.js";
import { StagingMode, stageTableName } from "./staging-mode.js";

export type { PostgresTransaction } from "./sink-mode.js";

const SINK_ID = /^[A-Za-z0-9_.:]{1,150}$/;

/** COPY buffers kept for reuse per sink: one batch is collected while one is in flight. */
const SPARE_BUFFERS = 2;
/** A buffer grown beyond this (huge rows) is left to the garbage collector instead of kept. */
const SPARE_BUFFER_BYTES = 16 * 1024 * 1024;

/** Who runs a `sinkId/subtask` in this process: an attempt of one job. */
interface SinkClaim {
  readonly token: object;
  readonly jobId: string;
  readonly incarnation: number;
  readonly attemptNumber: number;
}

/** Sinks of this process, by `sinkId/subtask`: two with the same id would roll back each other's work. */
const activeSinks = new Map<string, SinkClaim>();

function unregister(attempt: { readonly registered: string; readonly token: object }): void {
  // Only its own entry: a later attempt may have registered the same key meanwhile.
  if (activeSinks.get(attempt.registered)?.token === attempt.token) activeSinks.delete(attempt.registered);
}

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

/** One attempt's setup with the two modes built on it (a restored transaction may be of either). */
interface Attempt {
  readonly setup: SinkSetup;
  readonly prepared: PreparedMode;
  readonly staging: StagingMode;
  /** The attempt it belongs to, so a reused instance never runs on a finished attempt's pool. */
  readonly attemptNumber: number;
  readonly incarnation: number;
  readonly registered: string;
  /** Identifies this attempt's entry in the registry of running sinks. */
  readonly token: object;
}

/**
 * The default sink id: `<jobId>.<operatorUid>`, with characters other than letters, digits, `_`,
 * `.` and `:` replaced by `_` (plus a short hash of the original when anything was replaced, so two
 * ids that differ only there stay apart).
 *
 * @example
 * ```ts
 * defaultSinkId("orders", "out"); // "orders.out"
 * defaultSinkId("g2-pg", "out"); // "g2_pg.out_d5bc50"
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
 * `COMMIT PREPARED` on completion; see `PreparedMode`) and `staging` (a staging table per
 * checkpoint, moved into the target in one transaction on completion; see `StagingMode`). `auto`
 * picks `prepared` when the server has `max_prepared_transactions > 0` and logs the choice.
 *
 * Every commit writes a marker row (sink, subtask, checkpoint) in the same transaction, so a
 * commit replayed after a crash is recognised, and a gid that vanished without a marker is
 * reported as lost data, never ignored. An epoch per (sink, subtask), raised at the start of every
 * attempt, names the attempt's gids and staging tables and fences older attempts (zombies).
 *
 * One instance may serve several attempts (an in-process restart reuses it): each attempt opens its
 * own pool and epoch in `openResources`, and `closeResources` (the last step of `close()`) ends them.
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
  /** The running attempt's setup, started on first use; cleared by `close()`. */
  private attemptPromise: Promise<Attempt> | undefined;
  private attempt: Attempt | undefined;
  private sequence = 0;
  /** Emptied COPY buffers of sent batches, reused for the next ones (no new memory per batch). */
  private readonly spareBuffers: CopyTextBuffer[] = [];

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
    return this.attempt?.setup.mode;
  }

  // ---- TwoPhaseCommitSink -----------------------------------------------------------------------

  /**
   * `backgroundCommits` when given; otherwise on in staging mode, whose commit rewrites the
   * checkpoint's rows into the target (records keep flowing meanwhile), off in prepared mode, whose
   * `COMMIT PREPARED` is quick.
   */
  protected override commitsInBackground(): boolean {
    return this.options.backgroundCommits ?? this.attempt?.setup.mode === "staging";
  }

  protected override async beginTransaction(): Promise<PostgresTransaction> {
    const { setup } = await this.ready();
    const sequence = this.sequence++;
    const txn: PostgresTransaction = {
      mode: setup.mode,
      sinkId: setup.sinkId,
      subtask: setup.subtask,
      epoch: setup.epoch,
      sequence,
      rows: 0,
    };
    if (setup.mode === "staging")
      txn.stageTable = stageTableName(setup.sinkId, setup.subtask, setup.epoch, sequence);
    this.handles.set(txn, { records: [], copy: undefined, stageCreated: false, nextSeq: 0 });
    return txn;
  }

  protected override async invoke(txn: PostgresTransaction, value: IN): Promise<void> {
    const handle = this.handleOf(txn);
    const target = (this.attempt ?? (await this.ready())).setup.target;
    if (this.append(handle, target, value) >= this.batchSize) await this.flush(txn, handle);
  }

  protected override async invokeBatch(
    txn: PostgresTransaction,
    values: readonly IN[],
    _context: SinkContext,
  ): Promise<void> {
    const handle = this.handleOf(txn);
    const target = (this.attempt ?? (await this.ready())).setup.target;
    for (const value of values) {
      if (this.append(handle, target, value) >= this.batchSize) await this.flush(txn, handle);
    }
  }

  protected override async preCommit(
    txn: PostgresTransaction,
    checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    const attempt = await this.ready();
    const handle = this.handleOf(txn);
    await this.flush(txn, handle);
    await this.settle(handle);
    txn.checkpointId = checkpoint.checkpointId;
    await this.modeOf(attempt, txn).preCommit(txn, handle, checkpoint.checkpointId);
  }

  protected override async commit(txn: PostgresTransaction): Promise<void> {
    const attempt = await this.ready();
    await this.modeOf(attempt, txn).commit(txn);
  }

  protected override async recoverAndCommit(txn: PostgresTransaction): Promise<void> {
    const attempt = await this.ready();
    this.checkOwnTransaction(attempt.setup, txn);
    await this.modeOf(attempt, txn).commit(txn);
  }

  /** Rolls back the open transaction, and a pending one's prepared gid or staging table. */
  protected override async abort(txn: PostgresTransaction): Promise<void> {
    const attempt = await this.ready();
    const handle = this.handles.get(txn);
    if (handle !== undefined) {
      handle.records = [];
      // Never sent: its memory can serve the next transaction.
      if (handle.copy !== undefined) this.recycle(handle.copy);
      handle.copy = undefined;
      await this.settle(handle).catch(() => undefined);
    }
    await this.modeOf(attempt, txn).abort(txn, handle);
  }

  protected override async recoverAndAbort(txn: PostgresTransaction): Promise<void> {
    const attempt = await this.ready();
    this.checkOwnTransaction(attempt.setup, txn);
    await this.abort(txn);
  }

  /**
   * Rolls back every other prepared transaction and drops every staging table that this subtask —
   * or an old subtask it took over after the parallelism went down — left behind, and fences the
   * taken-over subtasks' zombies by starting a new epoch for them too.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    const { setup } = await this.ready();
    const pool = setup.pool.pool;
    const { parallelism } = this.runtimeContext;
    // Also old subtasks beyond the parallelism that no restored checkpoint names (they never
    // completed one): each has one owner, `s % parallelism`, as recovered ones do.
    const unnamed = (await subtasksWithLeftovers(setup)).filter(
      (subtask) => subtask >= parallelism && subtask % parallelism === setup.subtask,
    );
    for (const subtask of new Set([...this.recoveredSubtaskIndexes(), ...unnamed])) {
      const bump =
        subtask === setup.subtask
          ? setup.bump
          : await withClient(pool, (client) =>
              setup.control.bumpEpoch(
                client,
                setup.sinkId,
                subtask,
                this.lockTimeout,
                this.runtimeContext.incarnation,
              ),
            );
      await rollBackLeftovers(setup, subtask, bump);
    }
    if (this.lastCheckpointId === 0) {
      // A fresh start begins a new history: its checkpoint ids start again from 1.
      await setup.control.forgetAfter(pool, setup.sinkId, setup.subtask, undefined);
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
    // RECORD_REJECTED, CONFIGURATION: retrying cannot help.
    if (isOnceflowError(error)) return "fatal";
    if (isTransient(error)) return "retry";
    if (sqlState(error) === SqlState.insufficientPrivilege) return "fatal";
    return "retry";
  }

  /** Starts this attempt before recovery needs it: its registration, its pool (unless given), its epoch. */
  protected override async openResources(): Promise<void> {
    await this.ready();
  }

  /**
   * Ends this attempt after `close()` aborted the open transaction (or after a failed start): its
   * pool (when the sink made it) and its registration. The instance can start again — an
   * in-process restart reuses it — with a new pool and a new epoch. Pending prepared transactions
   * stay prepared: their checkpoint may still complete or be restored.
   */
  protected override async closeResources(): Promise<void> {
    const attempt = this.attemptPromise;
    this.attemptPromise = undefined;
    this.attempt = undefined;
    if (attempt !== undefined)
      await attempt.then(
        (started) => this.endAttempt(started),
        () => undefined,
      );
  }

  // ---- setup ------------------------------------------------------------------------------------

  /** This attempt's setup, started on first use. A setup of an earlier attempt (a reused instance that was not closed) is ended first. */
  private ready(): Promise<Attempt> {
    const context = this.runtimeContext;
    const current = this.attempt;
    if (
      current !== undefined &&
      (current.attemptNumber !== context.attemptNumber || current.incarnation !== context.incarnation)
    ) {
      this.attempt = undefined;
      this.attemptPromise = undefined;
      void this.endAttempt(current);
    }
    this.attemptPromise ??= this.startAttempt().catch((error: unknown) => {
      this.attemptPromise = undefined;
      throw error;
    });
    return this.attemptPromise;
  }

  private async startAttempt(): Promise<Attempt> {
    const context = this.runtimeContext;
    const sinkId = this.options.sinkId ?? defaultSinkId(context.jobId, context.operatorUid);
    checkSinkId(sinkId);
    const key = `${sinkId}/${context.subtaskIndex}`;
    const holder = activeSinks.get(key);
    // A newer attempt of the same job takes the id over, however the older one ended: its close
    // may still hang on a dead connection, and it is fenced by the new epoch anyway.
    const olderAttemptOfThisJob =
      holder !== undefined &&
      holder.jobId === context.jobId &&
      (holder.incarnation < context.incarnation ||
        (holder.incarnation === context.incarnation && holder.attemptNumber < context.attemptNumber));
    if (holder !== undefined && !olderAttemptOfThisJob) {
      throw new PostgresConfigurationError(
        "sinkId",
        PostgresErrorReason.invalidSinkId,
        `sink id "${sinkId}" is already used by another PostgresSink of subtask ${context.subtaskIndex} in this process: give each sink its own 'sinkId' (or its own operator uid)`,
      );
    }
    const token = {};
    activeSinks.set(key, {
      token,
      jobId: context.jobId,
      incarnation: context.incarnation,
      attemptNumber: context.attemptNumber,
    });
    try {
      const setup = await startSinkSetup({
        options: this.options,
        name: this.name,
        logger: this.logger,
        context,
        sinkId,
        requestedMode: this.requestedMode,
        lockTimeout: this.lockTimeout,
        markerRetention: this.markerRetention,
      });
      const attempt: Attempt = {
        setup,
        prepared: new PreparedMode(setup),
        staging: new StagingMode(setup),
        attemptNumber: context.attemptNumber,
        incarnation: context.incarnation,
        registered: key,
        token,
      };
      this.attempt = attempt;
      return attempt;
    } catch (error) {
      unregister({ registered: key, token });
      throw error;
    }
  }

  private async endAttempt(attempt: Attempt): Promise<void> {
    unregister(attempt);
    await attempt.setup.pool.close();
  }

  private modeOf(attempt: Attempt, txn: PostgresTransaction): SinkMode {
    return txn.mode === "prepared" ? attempt.prepared : attempt.staging;
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

  /**
   * Adds one record to the open batch: as COPY text for a table write (the row objects are garbage
   * right away), as it is for a custom write.
   *
   * @returns how many rows the batch holds now.
   */
  private append(handle: OpenHandle, target: TargetTable | undefined, value: IN): number {
    const row = this.rowOf(value);
    if (target === undefined) return handle.records.push(row);
    let copy = handle.copy;
    if (copy === undefined) {
      copy = this.spareBuffers.pop() ?? new CopyTextBuffer();
      handle.copy = copy;
    }
    if (target.upsert === undefined) copy.appendRow(row as readonly unknown[], target.encodings);
    else {
      // Upserts numbered, so the last record of a key wins.
      copy.appendRow(row as readonly unknown[], target.encodings, handle.nextSeq);
      handle.nextSeq++;
    }
    return copy.rows;
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
   * Sends the open batch. One batch stays in flight while the next is collected (encoded as its
   * rows arrive), so encoding and the server's work overlap; memory stays at two batches of COPY
   * text. A failure surfaces at the next flush or at the pre-commit, which waits for the last batch.
   */
  private async flush(txn: PostgresTransaction, handle: OpenHandle): Promise<void> {
    const pending = handle.records.length > 0 || (handle.copy?.rows ?? 0) > 0;
    const batch = pending ? this.takeBatch(handle, (await this.ready()).setup.target) : undefined;
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

  /** The open batch, taken out of the handle (which starts a new one); `undefined` when empty. */
  private takeBatch(handle: OpenHandle, target: TargetTable | undefined): OutgoingBatch | undefined {
    if (handle.records.length > 0) {
      const records = handle.records;
      handle.records = [];
      return { kind: "records", count: records.length, records };
    }
    const copy = handle.copy;
    if (copy === undefined || copy.rows === 0) return undefined;
    if (target === undefined) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${this.name}: rows were encoded for a table, but this attempt has no target table`,
      );
    }
    handle.copy = undefined;
    const upsert = target.upsert !== undefined;
    return {
      kind: "copy",
      count: copy.rows,
      columns: upsert ? [SEQ_COLUMN, ...target.columns] : target.columns,
      copy,
      rowAt: (line) => copy.rowAt(line, target.displays, upsert ? 1 : 0),
    };
  }

  private async send(txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch): Promise<void> {
    const attempt = await this.ready();
    await this.modeOf(attempt, txn).send(txn, handle, batch);
    txn.rows += batch.count;
    // Only after a COPY that completed: the socket no longer holds its bytes. A failed one's
    // buffer is left to the garbage collector (its connection may still be writing it).
    if (batch.kind === "copy") this.recycle(batch.copy);
  }

  /** Keeps an emptied COPY buffer for the next batch (at most two, none beyond 16 MiB). */
  private recycle(copy: CopyTextBuffer): void {
    if (this.spareBuffers.length >= SPARE_BUFFERS || copy.capacity > SPARE_BUFFER_BYTES) return;
    copy.reset();
    this.spareBuffers.push(copy);
  }

  private checkOwnTransaction(setup: SinkSetup, txn: PostgresTransaction): void {
    if (txn.sinkId !== setup.sinkId) {
      throw new PostgresConfigurationError(
        "sinkId",
        PostgresErrorReason.invalidSinkId,
        `the restored checkpoint holds a transaction of sink "${txn.sinkId}", but this sink's id is "${setup.sinkId}": keep 'sinkId' (and the job id and operator uid it defaults from) stable across restarts`,
      );
    }
  }
}

function invalid(setting: string, problem: string): PostgresConfigurationError {
  return new PostgresConfigurationError(setting, PostgresErrorReason.invalidOption, problem);
}

function positiveInteger(setting: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw invalid(setting, `must be a whole number of at least 1, got ${value}`);
  return value;
}

/**
 * Checks that a sink id is usable in gids and staging table names (also for the admin functions).
 *
 * @throws PostgresConfigurationError `INVALID_SINK_ID`.
 * @example
 * ```ts
 * checkSinkId("orders.out"); // fine; "orders-out" throws
 * ```
 */
export function checkSinkId(sinkId: string): void {
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
