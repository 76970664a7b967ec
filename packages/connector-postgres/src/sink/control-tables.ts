import { createHash } from "node:crypto";
import { CheckpointError, type RuntimeContext, TransactionError } from "@onceflow/core";
import type { ClientBase, Pool } from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { literal, type TableName, tableName } from "../sql/identifiers.js";
import { SqlState, sqlState } from "../sql/pg-errors.js";
import { asPermissionError } from "../sql/table-schema.js";
import {
  type BumpingAttempt,
  type EpochRange,
  type EpochSpan,
  newerIncarnationSpans,
  parseEpochHistory,
  rangesOfSeries,
  recordBump,
  serializeEpochHistory,
} from "./epoch-history.js";

/** A connection or a pool: anything with `query`. */
type Queryable = ClientBase | Pool;

/**
 * The two small tables every PostgresSink shares in its schema:
 *
 * - markers: one row (sink, subtask, checkpoint) per committed checkpoint, written in the same
 *   transaction as the rows. It tells "already committed" from "lost" when a gid is gone, and turns
 *   a replayed commit into a no-op.
 * - epochs: one row (sink, subtask) whose number grows at every start of an attempt. Every step
 *   that makes rows durable or visible checks the number while holding a lock that the bump takes
 *   exclusively — the staging move a share lock on the row, `PREPARE TRANSACTION` and
 *   `COMMIT PREPARED` a shared advisory lock (a row lock would be kept by the prepared
 *   transaction) — so once a new attempt has bumped the epoch, an older one (a zombie) can neither
 *   prepare nor commit anything, and nothing it began before the bump is still in flight.
 */
export class ControlTables {
  readonly markers: TableName;
  readonly epochs: TableName;

  constructor(schema: string, markerTable: string, epochTable: string) {
    this.markers = tableName(schema, markerTable);
    this.epochs = tableName(schema, epochTable);
  }

  /** Creates both tables when missing; safe when several subtasks race to do it. */
  async ensure(client: ClientBase): Promise<void> {
    const statements = [
      `CREATE TABLE IF NOT EXISTS ${this.markers.sql} (
         sink_id text NOT NULL, subtask integer NOT NULL, checkpoint_id bigint NOT NULL,
         epoch bigint NOT NULL, row_count bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (sink_id, subtask, checkpoint_id))`,
      `CREATE TABLE IF NOT EXISTS ${this.epochs.sql} (
         sink_id text NOT NULL, subtask integer NOT NULL, epoch bigint NOT NULL,
         bumps jsonb NOT NULL DEFAULT '[]', job_id text, PRIMARY KEY (sink_id, subtask))`,
    ];
    for (const statement of statements) {
      try {
        await client.query(statement);
      } catch (error) {
        // Two sessions creating the same table at once: the loser sees a duplicate.
        const state = sqlState(error);
        if (state === SqlState.uniqueViolation || state === SqlState.duplicateTable) continue;
        throw asPermissionError(
          error,
          "controlSchema",
          `creating ${this.markers.sql} and ${this.epochs.sql}`,
        );
      }
    }
    // Epoch tables made by earlier versions: add the newer columns (only then, as ALTER TABLE needs ownership).
    const present = await client.query<{ name: string }>(
      `SELECT attname AS name FROM pg_attribute WHERE attrelid = $1::regclass AND attname IN ('bumps', 'job_id') AND NOT attisdropped`,
      [this.epochs.sql],
    );
    const columns = { bumps: "jsonb NOT NULL DEFAULT '[]'", job_id: "text" };
    for (const [column, type] of Object.entries(columns)) {
      if (present.rows.some((row) => row.name === column)) continue;
      try {
        await client.query(`ALTER TABLE ${this.epochs.sql} ADD COLUMN IF NOT EXISTS ${column} ${type}`);
      } catch (error) {
        throw asPermissionError(error, "controlSchema", `adding the column ${column} to ${this.epochs.sql}`);
      }
    }
  }

  /**
   * Starts a new epoch for (sink, subtask), recording which incarnation started it (see
   * `epoch-history.ts`), and says which earlier epochs newer incarnations of the same series
   * started: a zombie's start must not clean up after them. The row also names the job that uses
   * the sink id: another job's start is refused. Waits (up to `lockTimeoutMs`) for any commit of an
   * older epoch that holds the share lock; throws the lock error when that takes longer.
   *
   * @throws PostgresConfigurationError `SINK_ID_CLAIMED` when another job uses this sink id.
   * @throws CheckpointError `SUPERSEDED` when a newer incarnation of the series already started an
   *   epoch here: this attempt is a zombie, and bumping would fence the process that replaced it.
   */
  async bumpEpoch(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    lockTimeoutMs: number,
    attempt: BumpingAttempt,
  ): Promise<EpochBump> {
    await client.query("BEGIN");
    try {
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`);
      // Waits for prepares and commits of older epochs that are in flight (see withEpochFence).
      // It also orders the bumps of (sink, subtask): the history read next is complete.
      await client.query("SELECT pg_advisory_xact_lock($1, $2)", this.fenceKey(sinkId, subtask));
      const previous = await client.query<{ epoch: string; bumps: unknown; job_id: string | null }>(
        `SELECT epoch::text, bumps, job_id FROM ${this.epochs.sql} WHERE sink_id = $1 AND subtask = $2`,
        [sinkId, subtask],
      );
      const claimedBy = previous.rows[0]?.job_id ?? null;
      if (claimedBy !== null && claimedBy !== attempt.jobId) {
        throw this.claimedError(sinkId, subtask, claimedBy, attempt.jobId);
      }
      const ours = await rangesOfSeries(parseEpochHistory(previous.rows[0]?.bumps), attempt);
      const newer = newerIncarnationSpans(ours, attempt);
      // A start of an older incarnation — a zombie resumed between its claim and its sink's start —
      // must not fence the newer process that took over: it would fail that process's next commit.
      // Refused, the epoch left as it is. Only within a series the runtime gave (a context made by
      // hand has none: its zombie bumps, keeping what newer incarnations left, as below).
      if (attempt.series !== undefined && newer.length > 0) {
        throw supersededStart(sinkId, subtask, attempt, ours);
      }
      const epoch = Number(previous.rows[0]?.epoch ?? 0) + 1;
      await client.query(
        `INSERT INTO ${this.epochs.sql} (sink_id, subtask, epoch, bumps, job_id) VALUES ($1, $2, $3, $4::jsonb, $5)
         ON CONFLICT (sink_id, subtask) DO UPDATE SET epoch = EXCLUDED.epoch, bumps = EXCLUDED.bumps, job_id = EXCLUDED.job_id`,
        [sinkId, subtask, epoch, serializeEpochHistory(recordBump(ours, epoch, attempt)), attempt.jobId],
      );
      await client.query("COMMIT");
      return { epoch, epochsOfNewerIncarnations: newer };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    }
  }

  private claimedError(
    sinkId: string,
    subtask: number,
    claimedBy: string,
    jobId: string,
  ): PostgresConfigurationError {
    return new PostgresConfigurationError(
      "sinkId",
      PostgresErrorReason.sinkIdClaimed,
      `sink id "${sinkId}" is used by job "${claimedBy}" (its row for subtask ${subtask} in ${this.epochs.sql}), so job "${jobId}" cannot use it: sinks of two jobs that share a sink id fence each other's transactions, and data of completed checkpoints fails to commit. Give one of the sinks its own sinkId (option sinkId; the default, <jobId>.<operator uid>, is unique per job). If job "${claimedBy}" is gone for good and job "${jobId}" takes its place, release the id first: UPDATE ${this.epochs.sql} SET job_id = NULL WHERE sink_id = ${literal(sinkId)}`,
    );
  }

  /**
   * Inside a commit transaction: checks the epoch is still ours. With `lock` (staging moves) the row
   * is locked in share mode, so a newer process's bump waits for the move to end. Prepared
   * transactions must not lock it: they would hold the lock until COMMIT PREPARED and block the
   * bump of the very process that recovers them (they use {@link withEpochFence} instead).
   *
   * @throws TransactionError `TRANSACTION_FENCED` when a newer process of the same sink started.
   */
  async checkEpoch(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    epoch: number,
    checkpointId: number,
    lock: boolean,
  ): Promise<void> {
    const result = await client.query<{ epoch: string }>(
      `SELECT epoch::text FROM ${this.epochs.sql} WHERE sink_id = $1 AND subtask = $2${lock ? " FOR SHARE" : ""}`,
      [sinkId, subtask],
    );
    const current = Number(result.rows[0]?.epoch ?? Number.NaN);
    if (current !== epoch) {
      throw new TransactionError(
        "TRANSACTION_FENCED",
        `sink "${sinkId}" subtask ${subtask}: checkpoint ${checkpointId} was not committed because a newer process of this sink started (epoch ${current}, this process has ${epoch}); this process is a zombie and must stop — the newer one recovers the data from its checkpoint`,
        { checkpointId, transactionId: `${sinkId}/${subtask}/${checkpointId}` },
      );
    }
  }

  /**
   * Runs `work` (a `PREPARE TRANSACTION` or a `COMMIT PREPARED`) only while `epoch` is still the
   * newest of (sink, subtask), holding a shared session-level advisory lock that {@link bumpEpoch}
   * takes exclusively: a bump waits for the work to end, and work after a bump sees the new epoch
   * and is refused. Session-level, so a prepared transaction does not keep it.
   *
   * @throws TransactionError `TRANSACTION_FENCED` when a newer attempt of the same sink started.
   * @example
   * ```ts
   * await control.withEpochFence(client, "orders.out", 0, epoch, 12, () => client.query("COMMIT PREPARED 'orders.out-0-3-12'"));
   * ```
   */
  async withEpochFence<T>(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    epoch: number,
    checkpointId: number,
    work: () => Promise<T>,
  ): Promise<T> {
    const key = this.fenceKey(sinkId, subtask);
    await client.query("SELECT pg_advisory_lock_shared($1, $2)", key);
    try {
      await this.checkEpoch(client, sinkId, subtask, epoch, checkpointId, false);
      return await work();
    } finally {
      // A lost connection releases the lock by itself.
      await client.query("SELECT pg_advisory_unlock_shared($1, $2)", key).catch(() => undefined);
    }
  }

  /** The advisory lock of (sink, subtask): a hash of the epoch table and sink id, and the subtask. */
  private fenceKey(sinkId: string, subtask: number): [number, number] {
    const digest = createHash("sha256").update(`${this.epochs.sql}/${sinkId}`).digest();
    return [digest.readInt32BE(0), subtask | 0];
  }

  async insertMarker(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    checkpointId: number,
    epoch: number,
    rowCount: number,
  ): Promise<void> {
    await client.query(
      `INSERT INTO ${this.markers.sql} (sink_id, subtask, checkpoint_id, epoch, row_count) VALUES ($1, $2, $3, $4, $5)`,
      [sinkId, subtask, checkpointId, epoch, rowCount],
    );
  }

  async hasMarker(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    checkpointId: number,
  ): Promise<boolean> {
    const result = await client.query(
      `SELECT 1 FROM ${this.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id = $3`,
      [sinkId, subtask, checkpointId],
    );
    return (result.rowCount ?? 0) > 0;
  }

  /** Keeps the markers bounded: the ones below `checkpointId - keep` can no longer be asked about. */
  async prune(
    client: ClientBase,
    sinkId: string,
    subtask: number,
    checkpointId: number,
    keep: number,
  ): Promise<void> {
    await client.query(
      `DELETE FROM ${this.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id < $3`,
      [sinkId, subtask, checkpointId - keep],
    );
  }

  /**
   * On recovery: forgets markers of checkpoints after the restored one (a fresh start forgets them
   * all), so that the checkpoint ids this run uses again start clean. Safe only after the epoch bump.
   */
  async forgetAfter(
    client: Queryable,
    sinkId: string,
    subtask: number,
    checkpointId: number | undefined,
  ): Promise<void> {
    await client.query(
      `DELETE FROM ${this.markers.sql} WHERE sink_id = $1 AND subtask = $2 AND checkpoint_id > $3`,
      [sinkId, subtask, checkpointId ?? -1],
    );
  }
}

/** The start of an older incarnation than one that already started an epoch of (sink, subtask). */
function supersededStart(
  sinkId: string,
  subtask: number,
  attempt: BumpingAttempt,
  ours: readonly EpochRange[],
): CheckpointError {
  const newest = ours.reduce((found, range) => (range.incarnation > found.incarnation ? range : found));
  return new CheckpointError(
    "SUPERSEDED",
    `sink "${sinkId}" subtask ${subtask}: incarnation ${attempt.incarnation} of job '${attempt.jobId}' cannot start: incarnation ${newest.incarnation}, a newer process that took the job over, started epoch ${newest.to} of this sink after it was claimed (this process was frozen, cut off, or replaced while it started). It stops without fencing the newer process, which carries on from the latest checkpoint; if no other process should run, look for a second deployment of this job.`,
  );
}

/**
 * What {@link ControlTables.bumpEpoch} did: the new epoch, and the spans of earlier epochs that
 * newer incarnations had started — only for an attempt without an incarnation series (a context
 * made by hand), a zombie that resumed; with a series such a start is refused.
 *
 * @example
 * ```ts
 * const bump: EpochBump = { epoch: 8, epochsOfNewerIncarnations: [{ from: 7, to: 7 }] };
 * ```
 */
export interface EpochBump {
  readonly epoch: number;
  readonly epochsOfNewerIncarnations: readonly EpochSpan[];
}

/**
 * The attempt facts a bump records, from the runtime context.
 *
 * @example
 * ```ts
 * await control.bumpEpoch(client, sinkId, 0, 10_000, bumpingAttemptOf(context));
 * ```
 */
export function bumpingAttemptOf(
  context: Pick<RuntimeContext, "jobId" | "incarnation" | "incarnationSeries">,
): BumpingAttempt {
  const series = context.incarnationSeries;
  return {
    jobId: context.jobId,
    incarnation: context.incarnation,
    series: series?.series,
    newestIncarnation: series === undefined ? undefined : () => series.newestIncarnation(),
  };
}
