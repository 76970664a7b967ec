import type { SourceSplit } from "@onceflow/core";

/**
 * A transaction snapshot as `pg_current_snapshot()` gives it, reduced to 32-bit transaction ids
 * (what pgoutput sends): ids before `xmin` are visible, ids from `xmax` on are not, and the ones in
 * `inProgress` are not.
 *
 * @example
 * ```ts
 * const snapshot: TransactionSnapshot = { xmin: 750, xmax: 754, inProgress: [751] };
 * ```
 */
export interface TransactionSnapshot {
  readonly xmin: number;
  readonly xmax: number;
  readonly inProgress: readonly number[];
}

/** `a` comes before `b`, in PostgreSQL's circular 32-bit transaction id order. */
function precedes(a: number, b: number): boolean {
  return ((a - b) | 0) < 0;
}

/**
 * Whether the changes of transaction `xid` are visible in `snapshot` (committed before it was taken).
 *
 * @example
 * ```ts
 * isVisibleIn(749, { xmin: 750, xmax: 754, inProgress: [] }); // true
 * ```
 */
export function isVisibleIn(xid: number, snapshot: TransactionSnapshot): boolean {
  if (precedes(xid, snapshot.xmin)) return true;
  if (!precedes(xid, snapshot.xmax)) return false;
  return !snapshot.inProgress.includes(xid);
}

/**
 * Rows of a table read by a snapshot taken when an interrupted initial snapshot was resumed: the
 * rows with a key after `afterKey` (all rows when null) were read as of `snapshot`, so stream
 * changes of those rows by transactions visible in it are already in what was read.
 *
 * @example
 * ```ts
 * const segment: ResumedSegment = { afterKey: ["100"], snapshot: { xmin: 750, xmax: 754, inProgress: [] }, takenAtLsn: "0/16B3748" };
 * ```
 */
export interface ResumedSegment {
  readonly afterKey: readonly string[] | null;
  readonly snapshot: TransactionSnapshot;
  /** `pg_current_wal_lsn()` when it was taken: transactions committed after this LSN are not visible in it. */
  readonly takenAtLsn: string;
}

/**
 * How far the initial snapshot of one table got: rows are read in primary key order, and `lastKey`
 * (the text form of the last key read) is where reading goes on.
 *
 * @example
 * ```ts
 * const progress: SnapshotTableProgress = { table: "public.orders", done: false, lastKey: ["100"], rowsRead: 100, segments: [] };
 * ```
 */
export interface SnapshotTableProgress {
  /** `schema.table`. */
  readonly table: string;
  readonly done: boolean;
  readonly lastKey: readonly string[] | null;
  readonly rowsRead: number;
  readonly segments: readonly ResumedSegment[];
}

/**
 * One split of a {@link PostgresChangesSource}: one replication slot and its publication, and the
 * position read so far — the checkpointed state of the source.
 *
 * - `flushLsn`: every transaction whose commit LSN is before it has been handed out. It is also
 *   what the slot's `confirmed_flush_lsn` is advanced to once a checkpoint holding it completes.
 * - `partial`: the transaction being handed out when the checkpoint was taken, and how many of its
 *   changes were; after a restore those are skipped.
 * - `snapshot`: present while the initial snapshot is under way.
 *
 * @example
 * ```ts
 * const split: PostgresChangesSplit = { splitId: "orders", slotName: "onceflow_job_0", publication: "onceflow_job",
 *   tables: ["public.orders"], flushLsn: "0/16B3748" };
 * ```
 */
export interface PostgresChangesSplit extends SourceSplit {
  readonly slotName: string;
  readonly publication: string;
  /** The tables this split captures, `schema.table`. */
  readonly tables: readonly string[];
  /** Undefined until the slot was created (a split never started). */
  readonly flushLsn?: string;
  readonly partial?: { readonly commitLsn: string; readonly changes: number };
  readonly snapshot?: {
    readonly consistentPoint: string;
    readonly tables: readonly SnapshotTableProgress[];
  };
}
