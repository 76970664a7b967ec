import { randomBytes } from "node:crypto";
import {
  type CommitErrorClassification,
  type CommitRetryOptions,
  ConfigurationError,
  jsonSerializer,
  type RuntimeContext,
  TwoPhaseCommitSink,
} from "@onceflow/core";
import { createClient, type RedisClientType } from "redis";
import { COMMIT_SCRIPT, RedisSinkKeys } from "./redis-keys.js";

/**
 * A connected node-redis client, as {@link RedisSinkOptions.createClient} returns it.
 *
 * @example
 * ```ts
 * const client: RedisClient = createClient({ url: "redis://127.0.0.1:6379" });
 * ```
 */
export type RedisClient = RedisClientType;

/**
 * Settings of a {@link RedisSink}.
 *
 * @example
 * ```ts
 * const options: RedisSinkOptions<Order> = { url: "redis://127.0.0.1:6379", key: "orders", sinkId: "orders-sink" };
 * ```
 */
export interface RedisSinkOptions<IN> {
  /** The Redis server, e.g. `redis://127.0.0.1:6379`. */
  readonly url: string;
  /** The destination list: committed records are appended to it (RPUSH), in commit order. */
  readonly key: string;
  /**
   * Names this sink's staged lists and commit markers: unique per sink, the same across restarts
   * (recovery deletes what this sinkId's subtasks left). Default: `key`.
   */
  readonly sinkId?: string;
  /** First part of every key the sink makes (default `onceflow`). */
  readonly keyPrefix?: string;
  /** How a record becomes a list element (default `JSON.stringify`). */
  readonly serialize?: (value: IN) => string;
  /**
   * How long a commit marker stays, in seconds (default 7 days). Committing a transaction again
   * after that — restoring a checkpoint older than this — fails instead of writing twice.
   */
  readonly commitMarkerTtlSeconds?: number;
  /** Records per RPUSH when staging (default 1000). */
  readonly stageBatchSize?: number;
  /** Makes the client (TLS, credentials, a test's own); default `createClient({ url })`. Not connected yet. */
  readonly createClient?: (url: string) => RedisClient;
  /** Shown in logs and errors (default `RedisSink`). */
  readonly name?: string;
  readonly commitRetry?: CommitRetryOptions;
}

/**
 * The transaction handle stored in checkpoints: only ids and a count, never the records (they are
 * buffered in memory until `preCommit` stages them in Redis).
 *
 * @example
 * ```ts
 * const transaction: RedisTransaction = { id: "i3-a1b2c3d4e5f60718", subtaskIndex: 0, recordCount: 3 };
 * ```
 */
export interface RedisTransaction {
  /**
   * Names the staged list and the commit marker: `i<incarnation>-<16 hex digits>`, the incarnation
   * of the process that began it (handles stored before that have the hex digits only).
   */
  readonly id: string;
  /** The subtask that wrote it: recovery cleans up per subtask. */
  readonly subtaskIndex: number;
  /** Set by `preCommit`: the records staged. 0 commits nothing. */
  recordCount: number;
}

/** Neither the commit marker nor the staged records are there: retrying cannot bring them back. */
class TransactionLostError extends Error {}

const DAY_SECONDS = 24 * 60 * 60;

/**
 * An exactly-once sink into a Redis list. Records are buffered per transaction; at the checkpoint
 * barrier `preCommit` stages them in a list of their own (MULTI/EXEC: all or nothing); once the
 * checkpoint is stored, `commit` runs a Lua script that moves them into the destination list and
 * sets a commit marker in one atomic step, so committing again does nothing. A restart deletes
 * what a crashed attempt staged without a stored checkpoint — never what a newer incarnation
 * staged; {@link listStagedTransactions} shows what is staged right now.
 *
 * The sink opens its own client in `openResources` and closes it in `closeResources`.
 *
 * @example
 * ```ts
 * stream.sinkTo(() => new RedisSink<Order>({ url: "redis://127.0.0.1:6379", key: "orders" }));
 * ```
 */
export class RedisSink<IN> extends TwoPhaseCommitSink<IN, RedisTransaction> {
  private readonly settings: RedisSinkOptions<IN>;
  private readonly keys: RedisSinkKeys;
  private readonly toElement: (value: IN) => string;
  private readonly markerTtl: number;
  private readonly batchSize: number;
  /** Records of transactions not staged yet, by transaction id: in memory, never in the checkpoint. */
  private readonly buffers = new Map<string, string[]>();
  private client: RedisClient | undefined;

  constructor(options: RedisSinkOptions<IN>) {
    super({
      name: options.name ?? "RedisSink",
      // Plain JSON: the handle is three small fields, readable in `onceflow checkpoints inspect`.
      transactionSerializer: jsonSerializer<RedisTransaction>(),
      commitRetry: options.commitRetry,
    });
    if (!options.key) throw new ConfigurationError("key", "must name the destination list");
    this.settings = options;
    this.keys = new RedisSinkKeys(options.keyPrefix ?? "onceflow", options.sinkId ?? options.key);
    this.toElement = options.serialize ?? ((value) => JSON.stringify(value));
    this.markerTtl = options.commitMarkerTtlSeconds ?? 7 * DAY_SECONDS;
    if (!(Number.isInteger(this.markerTtl) && this.markerTtl > 0)) {
      throw new ConfigurationError(
        "commitMarkerTtlSeconds",
        `must be a whole number of seconds > 0, got ${this.markerTtl}`,
      );
    }
    this.batchSize = options.stageBatchSize ?? 1000;
    if (!(Number.isInteger(this.batchSize) && this.batchSize > 0)) {
      throw new ConfigurationError("stageBatchSize", `must be a whole number > 0, got ${this.batchSize}`);
    }
  }

  // ---- resources: one client per attempt ------------------------------------------------------

  protected override async openResources(_context: RuntimeContext): Promise<void> {
    const client = (this.settings.createClient ?? ((url: string) => createClient({ url })))(
      this.settings.url,
    );
    // Without a listener node-redis rethrows socket errors as uncaught; a failed command still rejects.
    client.on("error", () => {});
    this.client = client;
    await client.connect();
  }

  protected override async closeResources(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client?.isOpen) await client.close();
  }

  private get redis(): RedisClient {
    if (this.client === undefined) throw new Error(`${this.name}: no Redis client (the sink is not open)`);
    return this.client;
  }

  // ---- the transaction steps ------------------------------------------------------------------

  protected beginTransaction(): RedisTransaction {
    const { subtaskIndex, incarnation } = this.runtimeContext;
    const transaction = {
      // The incarnation in the id keeps a zombie's recovery from deleting a newer process's lists.
      id: `i${incarnation}-${randomBytes(8).toString("hex")}`,
      subtaskIndex,
      recordCount: 0,
    };
    this.buffers.set(transaction.id, []);
    return transaction;
  }

  protected invoke(transaction: RedisTransaction, value: IN): void {
    this.bufferOf(transaction).push(this.toElement(value));
  }

  protected async preCommit(transaction: RedisTransaction): Promise<void> {
    const records = this.bufferOf(transaction);
    if (records.length > 0) {
      const staged = this.keys.staged(transaction.subtaskIndex, transaction.id);
      // All or nothing, and repeatable: the list holds exactly this transaction's records.
      const multi = this.redis.multi().del(staged);
      for (let first = 0; first < records.length; first += this.batchSize) {
        multi.rPush(staged, records.slice(first, first + this.batchSize));
      }
      await multi.exec();
    }
    transaction.recordCount = records.length;
    this.buffers.delete(transaction.id);
  }

  protected async commit(transaction: RedisTransaction): Promise<void> {
    if (transaction.recordCount === 0) return; // nothing staged, nothing to publish
    const outcome = await this.redis.eval(COMMIT_SCRIPT, {
      keys: [
        this.keys.staged(transaction.subtaskIndex, transaction.id),
        this.keys.committed(transaction.id),
        this.settings.key,
      ],
      arguments: [String(transaction.recordCount), String(this.markerTtl)],
    });
    if (outcome === -1) {
      throw new TransactionLostError(
        `transaction ${transaction.id} (${transaction.recordCount} records) has neither its staged list nor a commit marker in Redis: ` +
          "its data is gone (a Redis restart without persistence, a deleted key, or a marker older than commitMarkerTtlSeconds)",
      );
    }
  }

  protected async abort(transaction: RedisTransaction): Promise<void> {
    this.buffers.delete(transaction.id);
    await this.redis.del(this.keys.staged(transaction.subtaskIndex, transaction.id));
  }

  /**
   * After recovery: delete what earlier attempts of this sink's subtasks staged and no restored
   * checkpoint committed (a pre-commit whose checkpoint was never stored, or newer than the one
   * restored). Subtask `s` of any earlier parallelism belongs to subtask `s % parallelism` now.
   * Lists of a newer incarnation are kept: this attempt is then a zombie (frozen after its
   * incarnation claim, started after a newer process) and the newer process's stored checkpoint
   * may still commit them.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    const { subtaskIndex, parallelism, incarnation } = this.runtimeContext;
    const mine: string[] = [];
    const kept: string[] = [];
    for (const key of await listStagedTransactions(this.redis, this.keys)) {
      const parsed = this.keys.parseStaged(key);
      if (parsed === undefined || parsed.subtaskIndex % parallelism !== subtaskIndex) continue;
      // Keys without an incarnation are from before incarnations were in ids: older than any.
      if (parsed.incarnation !== undefined && parsed.incarnation > incarnation) kept.push(key);
      else mine.push(key);
    }
    if (kept.length > 0) {
      this.logger.warn(
        { incarnation, kept },
        "kept staged lists of newer incarnations: this process is a zombie that resumed after a newer one started (it will be stopped), or the checkpoint storage was reset and its incarnations started again",
      );
    }
    if (mine.length === 0) return;
    await this.redis.del(mine);
    this.logger.info({ keys: mine.length }, "deleted staged lists that earlier attempts left behind");
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    return error instanceof TransactionLostError ? "fatal" : "retry";
  }

  protected override describeTransaction(transaction: RedisTransaction): string {
    return `${transaction.id} (subtask ${transaction.subtaskIndex}, ${transaction.recordCount} records)`;
  }

  private bufferOf(transaction: RedisTransaction): string[] {
    let buffer = this.buffers.get(transaction.id);
    if (buffer === undefined) {
      // A restored open transaction has no buffer: its records were never staged.
      buffer = [];
      this.buffers.set(transaction.id, buffer);
    }
    return buffer;
  }
}

/**
 * The staged lists of a sink that are in Redis right now, i.e. transactions pre-committed and
 * neither committed nor aborted yet. Once a job is done (or a contract case is over) this should
 * be empty; anything listed was left behind. The contract suite's leak check calls it.
 *
 * @example
 * ```ts
 * const client = await createClient({ url }).connect();
 * await listStagedTransactions(client, { sinkId: "orders" }); // [] when nothing is left behind
 * ```
 */
export async function listStagedTransactions(
  client: RedisClient,
  sink: { readonly sinkId: string; readonly keyPrefix?: string },
): Promise<string[]> {
  const keys =
    sink instanceof RedisSinkKeys ? sink : new RedisSinkKeys(sink.keyPrefix ?? "onceflow", sink.sinkId);
  const found: string[] = [];
  for await (const batch of client.scanIterator({ MATCH: keys.stagedPattern, COUNT: 500 }))
    found.push(...batch);
  return [...new Set(found)].sort();
}
