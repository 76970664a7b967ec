/**
 * One replication connection (`replication: 'database'`) speaking the streaming replication
 * protocol through the `pg` driver: pg parses CopyBothResponse and CopyData, and sends CopyData
 * with `sendCopyFromChunk`. The stream is read through a bounded queue: when it holds
 * {@link HIGH_WATER} messages the socket is paused, so an unread WAL backlog stays on the server.
 */
import type pg from "pg";
import { pgDriver } from "../sql/pg-loader.js";
import { PostgresReplicationConnectionError } from "./changes-errors.js";
import { lsnToBigInt, nowPostgresMicros } from "./lsn.js";

/** What arrives on the stream: WAL data (a pgoutput message) or a keepalive with the server's sent position. */
export type StreamItem =
  | { readonly kind: "data"; readonly walStart: bigint; readonly payload: Buffer }
  | { readonly kind: "keepalive"; readonly walEnd: bigint };

const HIGH_WATER = 2000;
const LOW_WATER = 500;

/** Session settings both the stream and the snapshot use, so values read the same way. */
export const TEXT_FORMAT_OPTIONS =
  "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3 -c bytea_output=hex";

interface PgConnectionInternals {
  on(event: "copyData", listener: (message: { chunk: Buffer }) => void): void;
  sendCopyFromChunk(chunk: Buffer): void;
  stream: { pause(): void; resume(): void };
}

/**
 * A replication connection and its stream.
 *
 * @example
 * ```ts
 * const stream = await ReplicationStream.connect(config);
 * const { consistentPoint } = await stream.createSlot("orders_slot", false);
 * stream.start("orders_slot", "orders_pub", consistentPoint);
 * ```
 */
export class ReplicationStream {
  private readonly queue: StreamItem[] = [];
  private paused = false;
  private failure: Error | undefined;
  private waiter: (() => void) | undefined;
  private closed = false;
  private confirmedLsn = 0n;
  private statusTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly client: pg.Client,
    private readonly where: string,
  ) {}

  /** Opens a replication connection. */
  static async connect(config: pg.ClientConfig, where: string): Promise<ReplicationStream> {
    const Client = pgDriver().Client;
    const client = new Client({
      ...config,
      replication: "database",
      options: [config.options, TEXT_FORMAT_OPTIONS].filter(Boolean).join(" "),
    } as pg.ClientConfig);
    const stream = new ReplicationStream(client, where);
    client.on("error", (error) => stream.fail(error));
    client.on("end", () => {
      if (!stream.closed) stream.fail(new Error("the server closed the replication connection"));
    });
    await client.connect();
    return stream;
  }

  private get connection(): PgConnectionInternals {
    return (this.client as unknown as { connection: PgConnectionInternals }).connection;
  }

  /** A replication command that returns rows (CREATE_REPLICATION_SLOT, IDENTIFY_SYSTEM). */
  async command<R extends Record<string, unknown>>(sql: string): Promise<R[]> {
    const result = await this.client.query<R>(sql);
    return result.rows;
  }

  /**
   * Creates a logical slot with the pgoutput plugin. With `exportSnapshot`, the returned snapshot
   * stays importable (SET TRANSACTION SNAPSHOT) until this connection runs its next command.
   */
  async createSlot(
    slotName: string,
    exportSnapshot: boolean,
  ): Promise<{ consistentPoint: string; snapshotName: string | undefined }> {
    const rows = await this.command<{ consistent_point: string; snapshot_name: string | null }>(
      `CREATE_REPLICATION_SLOT "${slotName}" LOGICAL pgoutput ${exportSnapshot ? "EXPORT_SNAPSHOT" : "NOEXPORT_SNAPSHOT"}`,
    );
    const row = rows[0];
    if (row === undefined) throw new Error("CREATE_REPLICATION_SLOT returned no row");
    return { consistentPoint: row.consistent_point, snapshotName: row.snapshot_name ?? undefined };
  }

  /**
   * Starts streaming the slot's changes from `fromLsn` (the server starts at the later of it and the
   * slot's confirmed_flush_lsn). `confirmedLsn` is what status updates report until {@link confirm}.
   */
  start(slotName: string, publication: string, fromLsn: string, statusIntervalMs: number): void {
    this.confirmedLsn = lsnToBigInt(fromLsn);
    this.connection.on("copyData", ({ chunk }) => this.receive(chunk));
    const publicationLiteral = `'"${publication.replace(/"/g, '""').replace(/'/g, "''")}"'`;
    this.client
      .query(
        `START_REPLICATION SLOT "${slotName}" LOGICAL ${fromLsn} (proto_version '1', publication_names ${publicationLiteral})`,
      )
      .then(
        () => this.fail(new Error("the server ended the replication stream")),
        (error: unknown) => this.fail(error instanceof Error ? error : new Error(String(error))),
      );
    this.statusTimer = setInterval(() => this.sendStatus(false), statusIntervalMs);
    this.statusTimer.unref();
  }

  private receive(chunk: Buffer): void {
    const tag = chunk[0];
    if (tag === 0x77) {
      // XLogData: 'w', walStart, walEnd, sendTime, payload
      // A copy: the chunk is a view into pg's receive buffer, which pg reuses for later data while
      // this message waits in the queue.
      this.push({
        kind: "data",
        walStart: chunk.readBigUInt64BE(1),
        payload: Buffer.from(chunk.subarray(25)),
      });
    } else if (tag === 0x6b) {
      // Primary keepalive: 'k', walEnd, sendTime, replyRequested
      this.push({ kind: "keepalive", walEnd: chunk.readBigUInt64BE(1) });
      if (chunk[17] === 1) this.sendStatus(false);
    }
  }

  private push(item: StreamItem): void {
    this.queue.push(item);
    if (!this.paused && this.queue.length >= HIGH_WATER) {
      this.paused = true;
      this.connection.stream.pause();
    }
    this.wake();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  private fail(error: Error): void {
    if (this.closed || this.failure !== undefined) return;
    this.failure = error;
    this.wake();
  }

  /** The next item, or undefined when none is queued. Throws once the connection failed and the queue is drained. */
  take(): StreamItem | undefined {
    const item = this.queue.shift();
    if (item === undefined) {
      if (this.failure !== undefined) {
        throw new PostgresReplicationConnectionError(
          `the replication stream from ${this.where} failed: ${this.failure.message}`,
          { cause: this.failure, details: { code: (this.failure as { code?: string }).code } },
        );
      }
      return undefined;
    }
    if (this.paused && this.queue.length <= LOW_WATER) {
      this.paused = false;
      this.connection.stream.resume();
    }
    return item;
  }

  /** The failure that ended the stream, if any (items may still be queued). */
  get error(): Error | undefined {
    return this.failure;
  }

  /** Resolves when an item is queued or the stream failed. */
  available(): Promise<void> {
    if (this.queue.length > 0 || this.failure !== undefined || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.waiter;
      this.waiter = () => {
        previous?.();
        resolve();
      };
    });
  }

  /** Lets the server forget WAL before `lsn` (it becomes the slot's confirmed_flush_lsn). */
  confirm(lsn: bigint): void {
    if (lsn <= this.confirmedLsn) return;
    this.confirmedLsn = lsn;
    this.sendStatus(false);
  }

  private sendStatus(replyRequested: boolean): void {
    if (this.closed || this.failure !== undefined) return;
    const message = Buffer.alloc(34);
    message.write("r", 0);
    // written, flushed and applied: all the confirmed position — never beyond a completed checkpoint.
    message.writeBigUInt64BE(this.confirmedLsn, 1);
    message.writeBigUInt64BE(this.confirmedLsn, 9);
    message.writeBigUInt64BE(this.confirmedLsn, 17);
    message.writeBigInt64BE(nowPostgresMicros(), 25);
    message.writeUInt8(replyRequested ? 1 : 0, 33);
    try {
      this.connection.sendCopyFromChunk(message);
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** Ends the connection; never throws. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.statusTimer);
    this.wake();
    await this.client.end().catch(() => undefined);
  }
}
