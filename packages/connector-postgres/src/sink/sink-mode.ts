import type { Logger } from "@onceflow/core";
import type { PoolClient } from "pg";
import type { ColumnDisplay, CopyTextBuffer } from "../sql/copy-buffer.js";
import type { ColumnEncoding } from "../sql/copy-text.js";
import type { TableName } from "../sql/identifiers.js";
import type { PoolHandle } from "../sql/pool.js";
import type { ControlTables, EpochBump } from "./control-tables.js";

/**
 * The durable handle of one PostgresSink transaction, as stored in checkpoints. Everything needed
 * to commit or abort it from another process is here.
 *
 * @example
 * ```ts
 * const txn: PostgresTransaction = { mode: "prepared", sinkId: "orders.out", subtask: 0, epoch: 3, sequence: 7, rows: 5000, checkpointId: 12, gid: "orders.out-0-3-12" };
 * ```
 */
export interface PostgresTransaction {
  readonly mode: "prepared" | "staging";
  readonly sinkId: string;
  readonly subtask: number;
  /** The epoch of the attempt that wrote it (see the epoch table): grows at every start. */
  readonly epoch: number;
  /** Counts the transactions of one epoch; names the staging table. */
  readonly sequence: number;
  /** Rows written into it. */
  rows: number;
  /** The checkpoint that pre-committed it. */
  checkpointId?: number;
  /** Prepared mode: the gid `<sinkId>-<subtask>-<epoch>-<checkpoint>`, once prepared (absent for an empty transaction). */
  gid?: string;
  /** Staging mode: the staging table's name (in the target's schema), created on the first row. */
  stageTable?: string;
}

/** What a live transaction holds in this process only (never checkpointed). */
export interface OpenHandle {
  /** Custom write: records not yet sent, at most `batchSize`. */
  records: unknown[];
  /** Table write: rows not yet sent (at most `batchSize`), already encoded as COPY text. */
  copy: CopyTextBuffer | undefined;
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

/**
 * One batch ready to send: COPY text for a table write (a row PostgreSQL refuses is named by
 * reading its line back), the records themselves for a custom `write`.
 */
export type OutgoingBatch =
  | {
      readonly kind: "copy";
      readonly count: number;
      readonly columns: readonly string[];
      /** The rows as COPY text; unchanged until the send settles. */
      readonly copy: CopyTextBuffer;
      /** Row N (1-based, COPY's "line N") read back, in the target's columns, for a rejection. */
      readonly rowAt: (line: number) => readonly unknown[] | undefined;
    }
  | { readonly kind: "records"; readonly count: number; readonly records: unknown[] };

/** The target table and how rows reach it. */
export interface TargetTable {
  readonly table: TableName;
  readonly columns: readonly string[];
  readonly encodings: readonly ColumnEncoding[];
  /** How each column's values are shown when a rejection names a row (from the column types). */
  readonly displays: readonly ColumnDisplay[];
  readonly upsert?: {
    readonly conflictColumns: readonly string[];
    readonly updateColumns: readonly string[];
  };
  /** Prepared-mode upserts: rows of the open transaction wait here (never a temporary table: it could not be prepared). */
  readonly scratch?: TableName;
  /**
   * Staging mode: `ALTER TABLE` clauses that give a staging table the target's NOT NULL and CHECK
   * constraints on the written columns, so refused rows fail while written (naming the row), not
   * at the commit.
   */
  readonly stageConstraints?: readonly string[];
}

/** Everything decided once per attempt at start: mode, table layout, epoch. */
export interface SinkSetup {
  readonly name: string;
  readonly logger: Logger;
  readonly pool: PoolHandle;
  readonly mode: "prepared" | "staging";
  readonly sinkId: string;
  readonly subtask: number;
  /** This attempt's epoch of (sinkId, subtask): raised at every start, it fences older attempts. */
  readonly epoch: number;
  /** How the epoch was started: also which earlier epochs newer incarnations had started. */
  readonly bump: EpochBump;
  readonly control: ControlTables;
  /** The schema of the target table (and of staging and scratch tables). */
  readonly schema: string;
  readonly lockTimeout: number;
  readonly markerRetention: number;
  readonly target?: TargetTable;
  /** Custom write (prepared mode only). */
  readonly write?: (client: PoolClient, rows: readonly unknown[]) => Promise<void>;
}

/**
 * How one mode makes a transaction's rows durable, visible and gone: {@link PreparedMode}
 * (`PREPARE TRANSACTION` / `COMMIT PREPARED`) or {@link StagingMode} (a staging table moved into the
 * target). {@link PostgresSink} drives one of them; its `OutgoingBatches` encodes the rows and hands them to `send`.
 *
 * @example
 * ```ts
 * const mode: SinkMode = setup.mode === "prepared" ? new PreparedMode(setup) : new StagingMode(setup);
 * await mode.send(txn, handle, batch);
 * ```
 */
export interface SinkMode {
  /** Sends one batch into the transaction. */
  send(txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch): Promise<void>;
  /** Makes the transaction durable but invisible, as part of checkpoint `checkpointId`. */
  preCommit(txn: PostgresTransaction, handle: OpenHandle, checkpointId: number): Promise<void>;
  /** Makes a pre-committed transaction visible; idempotent (a replay finds the marker). */
  commit(txn: PostgresTransaction): Promise<void>;
  /** Discards a transaction, open or pre-committed; tolerates one that is already gone. */
  abort(txn: PostgresTransaction, handle: OpenHandle | undefined): Promise<void>;
}

/** The column that numbers upsert rows, so the last record of a key wins. */
export const SEQ_COLUMN = "__onceflow_seq";
