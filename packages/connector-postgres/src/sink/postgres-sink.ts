import {
  type CommitErrorClassification,
  type FunctionSnapshotContext,
  isOnceflowError,
  type SinkContext,
  TransactionError,
  TwoPhaseCommitSink,
  type TypeSerializer,
} from "@onceflow/core";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { isTransient, SqlState, sqlState } from "../sql/pg-errors.js";
import { withClient } from "../sql/pool.js";
import { bumpingAttemptOf } from "./control-tables.js";
import { rollBackLeftovers, subtasksWithLeftovers } from "./leftovers.js";
import type { PostgresSinkMode, PostgresSinkOptions } from "./options.js";
import { checkSinkId, checkTableOptions, defaultSinkId, invalid, positiveInteger } from "./options-check.js";
import { OutgoingBatches } from "./outgoing-batches.js";
import { PreparedMode } from "./prepared-mode.js";
import type { PostgresTransaction, SinkMode, SinkSetup } from "./sink-mode.js";
import { startSinkSetup } from "./sink-setup.js";
import { StagingMode, stageTableName } from "./staging-mode.js";

export type { PostgresTransaction } from "./sink-mode.js";

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
  private readonly lockTimeout: number;
  private readonly markerRetention: number;
  private readonly requestedMode: PostgresSinkMode;
  /** The running attempt's setup, started on first use; cleared by `close()`. */
  private attemptPromise: Promise<Attempt> | undefined;
  private attempt: Attempt | undefined;
  private sequence = 0;
  /** The open transactions' batches: collected as records arrive, sent one at a time. */
  private readonly batches: OutgoingBatches<IN>;

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
    const batchSize = positiveInteger("batchSize", options.batchSize ?? 5000);
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
    this.batches = new OutgoingBatches({
      name: this.name,
      batchSize,
      sink: options,
      target: async () => (await this.ready()).setup.target,
      send: async (txn, handle, batch) => {
        const attempt = await this.ready();
        await this.modeOf(attempt, txn).send(txn, handle, batch);
      },
      describe: (txn) => this.describeTransaction(txn),
    });
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
    this.batches.open(txn);
    return txn;
  }

  protected override async invoke(txn: PostgresTransaction, value: IN): Promise<void> {
    const handle = this.batches.handleOf(txn);
    const target = (this.attempt ?? (await this.ready())).setup.target;
    if (this.batches.append(handle, target, value)) await this.batches.flush(txn, handle);
  }

  protected override async invokeBatch(
    txn: PostgresTransaction,
    values: readonly IN[],
    _context: SinkContext,
  ): Promise<void> {
    const handle = this.batches.handleOf(txn);
    const target = (this.attempt ?? (await this.ready())).setup.target;
    for (const value of values) {
      if (this.batches.append(handle, target, value)) await this.batches.flush(txn, handle);
    }
  }

  protected override async preCommit(
    txn: PostgresTransaction,
    checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    const attempt = await this.ready();
    const handle = this.batches.handleOf(txn);
    await this.batches.flush(txn, handle);
    await this.batches.settle(handle);
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
    const handle = await this.batches.discard(txn);
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
                bumpingAttemptOf(this.runtimeContext),
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
