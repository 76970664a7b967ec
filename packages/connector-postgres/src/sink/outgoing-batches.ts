import { CheckpointError } from "@onceflow/core";
import { CopyTextBuffer } from "../sql/copy-buffer.js";
import type { PostgresSinkOptions } from "./options.js";
import { invalid } from "./options-check.js";
import {
  type OpenHandle,
  type OutgoingBatch,
  type PostgresTransaction,
  SEQ_COLUMN,
  type TargetTable,
} from "./sink-mode.js";

/** COPY buffers kept for reuse per sink: one batch is collected while one is in flight. */
const SPARE_BUFFERS = 2;
/** A buffer grown beyond this (huge rows) is left to the garbage collector instead of kept. */
const SPARE_BUFFER_BYTES = 16 * 1024 * 1024;

/**
 * What {@link OutgoingBatches} needs from its sink: the batch size, what to write, and the ways
 * into the running attempt (its target table, its mode's `send`).
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * const options: OutgoingBatchesOptions<Order> = {
 *   name: "PostgresSink", batchSize: 5000, sink: sinkOptions,
 *   target: async () => (await ready()).setup.target,
 *   send: async (txn, handle, batch) => modeOf(await ready(), txn).send(txn, handle, batch),
 *   describe: (txn) => `transaction #${txn.sequence}`,
 * };
 * ```
 */
export interface OutgoingBatchesOptions<IN> {
  /** The sink's name, for errors. */
  readonly name: string;
  /** Rows per batch: a batch that reaches it is sent. */
  readonly batchSize: number;
  /** The sink's options: a custom `write` gets the records as they are, a table write rows from `toRow` in `columns` order. */
  readonly sink: PostgresSinkOptions<IN>;
  /** The running attempt's target table (`undefined` for a custom write), asked when a batch is taken. */
  readonly target: () => Promise<TargetTable | undefined>;
  /** Sends one batch into the transaction: the running mode's `send`. */
  readonly send: (txn: PostgresTransaction, handle: OpenHandle, batch: OutgoingBatch) => Promise<void>;
  /** Names a transaction in errors. */
  readonly describe: (txn: PostgresTransaction) => string;
}

/**
 * The outgoing batches of a sink's open transactions: records are added to the open batch as they
 * arrive (encoded as COPY text for a table write, kept as they are for a custom `write`), and a
 * full batch is sent while the next is collected — one in flight at a time. Emptied COPY buffers
 * of sent batches are reused for the next ones. Kept apart from `PostgresSink`, which holds the
 * protocol (attempts, modes, recovery) and drives this pipeline.
 *
 * @internal Not exported from the package.
 * @example
 * ```ts
 * const batches = new OutgoingBatches(options);
 * batches.open(txn);
 * const handle = batches.handleOf(txn);
 * if (batches.append(handle, target, value)) await batches.flush(txn, handle);
 * await batches.flush(txn, handle); // at the pre-commit: the last batch…
 * await batches.settle(handle); // …and waiting for it
 * ```
 */
export class OutgoingBatches<IN> {
  private readonly options: OutgoingBatchesOptions<IN>;
  private readonly handles = new WeakMap<PostgresTransaction, OpenHandle>();
  /** Emptied COPY buffers of sent batches, reused for the next ones (no new memory per batch). */
  private readonly spareBuffers: CopyTextBuffer[] = [];

  constructor(options: OutgoingBatchesOptions<IN>) {
    this.options = options;
  }

  /** Starts the handle of a new transaction, with an empty batch. */
  open(txn: PostgresTransaction): void {
    this.handles.set(txn, { records: [], copy: undefined, stageCreated: false, nextSeq: 0 });
  }

  /**
   * The handle of a transaction opened in this process.
   *
   * @throws CheckpointError `CHECKPOINT_FAILED` for one that is not (a restored one).
   */
  handleOf(txn: PostgresTransaction): OpenHandle {
    const handle = this.handles.get(txn);
    if (handle === undefined) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${this.options.name}: ${this.options.describe(txn)} is not open in this process`,
      );
    }
    return handle;
  }

  /**
   * Adds one record to the open batch: as COPY text for a table write (the row objects are garbage
   * right away), as it is for a custom write.
   *
   * @returns whether the batch holds `batchSize` rows now (time to {@link OutgoingBatches.flush}).
   */
  append(handle: OpenHandle, target: TargetTable | undefined, value: IN): boolean {
    const row = this.rowOf(value);
    if (target === undefined) return handle.records.push(row) >= this.options.batchSize;
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
    return copy.rows >= this.options.batchSize;
  }

  /**
   * Sends the open batch. One batch stays in flight while the next is collected (encoded as its
   * rows arrive), so encoding and the server's work overlap; memory stays at two batches of COPY
   * text. A failure surfaces at the next flush or at the pre-commit, which waits for the last batch.
   */
  async flush(txn: PostgresTransaction, handle: OpenHandle): Promise<void> {
    const pending = handle.records.length > 0 || (handle.copy?.rows ?? 0) > 0;
    const batch = pending ? this.takeBatch(handle, await this.options.target()) : undefined;
    await this.settle(handle);
    if (batch === undefined) return;
    const sending = this.send(txn, handle, batch);
    // Observed here so a failure never becomes an unhandled rejection; settle() rethrows it.
    sending.catch(() => undefined);
    handle.inFlight = sending;
  }

  /** Waits for the batch in flight, rethrowing its failure. */
  async settle(handle: OpenHandle): Promise<void> {
    const inFlight = handle.inFlight;
    if (inFlight === undefined) return;
    try {
      await inFlight;
    } finally {
      handle.inFlight = undefined;
    }
  }

  /**
   * Drops an aborted transaction's unsent rows and waits for its batch in flight, whose failure no
   * longer matters.
   *
   * @returns its handle; `undefined` when it is not open in this process (a restored one).
   */
  async discard(txn: PostgresTransaction): Promise<OpenHandle | undefined> {
    const handle = this.handles.get(txn);
    if (handle !== undefined) {
      handle.records = [];
      // Never sent: its memory can serve the next transaction.
      if (handle.copy !== undefined) this.recycle(handle.copy);
      handle.copy = undefined;
      await this.settle(handle).catch(() => undefined);
    }
    return handle;
  }

  private rowOf(value: IN): unknown {
    const options = this.options.sink;
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
        `${this.options.name}: rows were encoded for a table, but this attempt has no target table`,
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
    await this.options.send(txn, handle, batch);
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
}
