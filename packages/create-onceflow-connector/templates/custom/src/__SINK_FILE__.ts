import { randomUUID } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import {
  type CommitErrorClassification,
  ConfigurationError,
  type FunctionSnapshotContext,
  jsonSerializer,
  type RuntimeContext,
  type SinkContext,
  TwoPhaseCommitSink,
} from "@onceflow/core";

// TODO: this skeleton writes to a stand-in for your system — a directory, where committed records
// are files and staged ones wait in `.staging/` — so its contract suite passes out of the box.
// Replace each step's body with your system's calls, keeping the rules written above each step;
// run `npm test` after every change: the contract suite tells you which rule a change broke.

/**
 * Settings of a {@link __SINK_CLASS__}.
 *
 * @example
 * ```ts
 * const options: __SINK_CLASS__Options = { directory: "out/orders" };
 * ```
 */
export interface __SINK_CLASS__Options {
  // TODO: what reaches your system instead: a URL, credentials, the table, topic or bucket.
  /** Where committed records go (the stand-in system); staged ones wait in its `.staging` folder. */
  readonly directory: string;
  /** Shown in logs and errors (default `__SINK_CLASS__`). */
  readonly name?: string;
}

/**
 * The transaction handle. The base class stores it in every checkpoint, so:
 *
 * - keep it SMALL: ids and counters, never the records (a checkpoint holds one handle per pending
 *   transaction; records in it would copy your output into every checkpoint);
 * - it must carry EVERYTHING needed to commit or abort the transaction from ANOTHER process: after
 *   a crash, a new process gets only this handle back (plus the sink's settings).
 *
 * @example
 * ```ts
 * const transaction: __SINK_CLASS__Transaction = { id: "i3-6f1c…", subtaskIndex: 0, recordCount: 3 };
 * ```
 */
export interface __SINK_CLASS__Transaction {
  /**
   * Unique per transaction: names its staged and its committed data in the external system. It
   * starts with `i<incarnation>-`: recovery must tell what a newer process staged (see
   * `finishRecoveringTransactions`).
   */
  readonly id: string;
  /** The subtask that wrote it: recovery cleans up per subtask. */
  readonly subtaskIndex: number;
  /** Set by `preCommit` (changes made there are stored in the checkpoint): records staged; 0 commits nothing. */
  recordCount: number;
}

/** The commit found neither the staged nor the committed data: it is gone, and retrying cannot help. */
class TransactionLostError extends Error {}

/**
 * An exactly-once sink: records go into a transaction of the external system, which is made
 * durable but invisible at each checkpoint barrier (`preCommit`) and made visible once that
 * checkpoint is stored (`commit`). The base class, `TwoPhaseCommitSink`, owns the protocol —
 * when each step runs, retries, recovery after a crash, rescaling; this class only says how to do
 * each step in the external system.
 *
 * The public methods (`initializeState`, `write`, `snapshotState`, `notifyCheckpointComplete`,
 * `close` …) are the runtime's: do not override them.
 *
 * @example
 * ```ts
 * job.fromSource(source, { uid: "in" }).sinkTo(() => new __SINK_CLASS__<Order>({ directory: "out/orders" }), { uid: "out" });
 * ```
 */
export class __SINK_CLASS__<IN> extends TwoPhaseCommitSink<IN, __SINK_CLASS__Transaction> {
  /** Where committed records go. */
  readonly directory: string;
  private readonly stagingDirectory: string;
  /** Records of the open transaction, by transaction id: in memory until `preCommit`, never in the handle. */
  private readonly buffers = new Map<string, IN[]>();

  constructor(options: __SINK_CLASS__Options) {
    super({
      name: options.name ?? "__SINK_CLASS__",
      // JSON: the stored handle stays readable by later versions of this class.
      transactionSerializer: jsonSerializer<__SINK_CLASS__Transaction>(),
      // Commits are retried with exponential backoff; when retries run out the job fails and the
      // transaction stays pending — the restart commits it. It is never dropped.
      commitRetry: { maxAttempts: 5, initialDelay: 100 },
      // TODO: transactionTimeout: your system's transaction timeout in ms, if it has one (warns
      // before the system aborts a pending transaction on its own).
    });
    // Settings are checked here, with an error saying what to change (code CONFIGURATION).
    if (typeof options.directory !== "string" || options.directory.length === 0) {
      throw new ConfigurationError("directory", "give the folder committed records are written to");
    }
    this.directory = options.directory;
    this.stagingDirectory = join(options.directory, ".staging");
  }

  /**
   * Opens what the sink talks to the system with — a client, a pool, a session — once per attempt,
   * first thing (before recovery), with the runtime context (job id, subtask) at hand.
   *
   * MAY: connect, authenticate, check that the destination exists (throw a `ConfigurationError`
   * saying what to change when it does not).
   * MUST NOT: commit or abort anything (recovery does that next, through the steps below).
   */
  protected override openResources(_context: RuntimeContext): void {
    // TODO: connect to your system and keep the client on the instance. The stand-in needs none.
  }

  /**
   * Closes what `openResources` opened: exactly once per attempt, last thing — after a success, a
   * failure, or a failed `openResources` (so check what exists). Override this, never `close()`.
   */
  protected override closeResources(): void {
    // TODO: close your client (`await this.client?.close()`).
  }

  /**
   * Starts a transaction: at start, and right after every pre-commit (on the record path, so keep
   * it quick). `this.lastCheckpointId` is the checkpoint it begins after.
   *
   * MAY: open a transaction or session in the system, pick the id.
   * MUST: put `this.runtimeContext.incarnation` in the id (or wherever the staged data is named),
   * so that `finishRecoveringTransactions` can leave alone what a newer incarnation staged.
   * MUST NOT: make anything visible, or reuse the id of a transaction that may still be pending.
   */
  protected beginTransaction(): __SINK_CLASS__Transaction {
    // TODO: open your system's transaction here (or lazily on the first record).
    const { subtaskIndex, incarnation } = this.runtimeContext;
    const transaction = { id: `i${incarnation}-${randomUUID()}`, subtaskIndex, recordCount: 0 };
    this.buffers.set(transaction.id, []);
    return transaction;
  }

  /**
   * Writes one record into the open transaction.
   *
   * MAY: buffer it (bounded), or send it to the system's staging area where readers do not see it.
   * MUST NOT: make it visible (that is `commit`'s job, after the checkpoint), or put it in the handle.
   */
  protected invoke(transaction: __SINK_CLASS__Transaction, value: IN, _context: SinkContext): void {
    // TODO: a real sink with large transactions sends records to the system as they come (or in
    // batches, see `invokeBatch`) instead of keeping them all in memory until the barrier.
    this.bufferOf(transaction).push(value);
  }

  /**
   * The checkpoint barrier: makes the transaction's data DURABLE in the system but still INVISIBLE.
   * After it returns, `commit` must be able to succeed — in this process or, given only the handle,
   * in another one after a crash.
   *
   * MAY: flush, fsync, `PREPARE TRANSACTION`, write a staging table or object, set fields of the
   * handle (they are stored in the checkpoint).
   * MUST NOT: make data visible: a crash before the checkpoint is stored would replay the records
   * from the previous checkpoint and show them twice.
   */
  protected async preCommit(
    transaction: __SINK_CLASS__Transaction,
    _checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    const records = this.bufferOf(transaction);
    transaction.recordCount = records.length;
    // An empty transaction stages nothing (and its commit does nothing).
    if (records.length > 0) {
      // TODO: stage the records in your system.
      await mkdir(this.stagingDirectory, { recursive: true });
      const file = await open(this.stagedPath(transaction), "w");
      try {
        await file.writeFile(records.map((record) => `${JSON.stringify(record)}\n`).join(""));
        await file.sync(); // durable: survives a crash of the machine, not only of the process
      } finally {
        await file.close();
      }
    }
    this.buffers.delete(transaction.id);
  }

  /**
   * The checkpoint that pre-committed the transaction is stored: makes the data visible.
   *
   * MUST be IDEMPOTENT: after a crash it runs again for a transaction that may already be
   * committed. Tell "already committed" (return) apart from "gone" (throw; classified `fatal`).
   * MAY: throw on a transient error: it is retried with backoff (`commitRetry`).
   * MUST NOT: depend on anything but the handle and the sink's settings (after a restore it runs in
   * a process that never saw the records), or write new data.
   */
  protected async commit(transaction: __SINK_CLASS__Transaction): Promise<void> {
    if (transaction.recordCount === 0) return;
    // TODO: commit in your system, e.g. `COMMIT PREPARED`, a rename, a move from staging to the
    // target, or an API call with the transaction id as idempotency key.
    try {
      await rename(this.stagedPath(transaction), this.committedPath(transaction));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      if (await exists(this.committedPath(transaction))) return; // committed before the crash: done
      throw new TransactionLostError(
        `transaction ${transaction.id}: neither its staged records nor its committed file exist`,
      );
    }
    await syncDirectory(this.directory); // the rename itself survives a crash of the machine
  }

  /**
   * Discards a transaction that will never be committed: the open one when the sink closes or fails.
   *
   * MUST tolerate a transaction that is already gone or never staged anything (no "not found" error).
   * MUST NOT: touch committed data.
   */
  protected async abort(transaction: __SINK_CLASS__Transaction): Promise<void> {
    this.buffers.delete(transaction.id);
    // TODO: roll the transaction back in your system.
    await rm(this.stagedPath(transaction), { force: true });
  }

  /**
   * After a restore: commits a pending transaction of the restored checkpoint, possibly written by
   * another process (the default is `commit`). Override when a new process must first reconnect to
   * the transaction (resume a transactional producer, look up a prepared transaction by id).
   */
  protected override recoverAndCommit(transaction: __SINK_CLASS__Transaction): Promise<void> {
    return this.commit(transaction);
  }

  /**
   * After a restore: aborts the transaction that was open when the restored checkpoint was taken;
   * it never reached `preCommit`, so nothing of it may ever become visible (the default is `abort`).
   */
  protected override recoverAndAbort(transaction: __SINK_CLASS__Transaction): Promise<void> {
    return this.abort(transaction);
  }

  /**
   * Once per start, after the restored transactions were committed and aborted (also on a fresh
   * start): removes what a crashed attempt left that no checkpoint will ever commit — transactions
   * that were open or whose checkpoint was never stored. Only for `recoveredSubtaskIndexes()` (this
   * subtask and, after scaling in, the old ones it took over): other subtasks clean their own.
   *
   * MUST NOT: touch what other subtasks or other jobs wrote (name your staged data per subtask),
   * nor what a NEWER INCARNATION staged: this attempt may be a zombie (a process frozen after it
   * started, resuming after a newer one) whose start comes after the newer process pre-committed a
   * transaction of a stored checkpoint; deleting it would lose those records. Put the incarnation in
   * transaction ids and skip ids of an incarnation greater than `this.runtimeContext.incarnation`.
   * Left-over staged data is a leak: locks held, storage used, transactions the system times out.
   */
  protected override async finishRecoveringTransactions(): Promise<void> {
    // TODO: list your system's staged or prepared transactions of these subtasks and roll them back.
    const owned = new Set(this.recoveredSubtaskIndexes());
    const { incarnation } = this.runtimeContext;
    const kept: string[] = [];
    for (const file of await listStagedFiles(this.directory)) {
      // `<subtask>-i<incarnation>-<uuid>.jsonl` (`<subtask>-<uuid>.jsonl` before: older than any)
      const match = /^(\d+)-(?:i(\d+)-)?/.exec(file);
      if (match === null || !owned.has(Number(match[1]))) continue;
      if (match[2] !== undefined && Number(match[2]) > incarnation) {
        kept.push(file); // a newer process staged it: it commits or deletes it, not this one
        continue;
      }
      await rm(join(this.stagingDirectory, file), { force: true });
    }
    if (kept.length > 0) {
      this.logger.warn({ incarnation, kept }, "kept staged transactions of newer incarnations");
    }
  }

  /**
   * What a failed `commit` means: `retry` (transient), `timed-out` (the system aborted the
   * transaction after its timeout: data lost), `fenced` (another writer took it over) or `fatal`.
   */
  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    // TODO: recognise your system's "transaction timed out" and "fenced" errors here.
    return error instanceof TransactionLostError ? "fatal" : "retry";
  }

  /** A short id for logs and errors. */
  protected override describeTransaction(transaction: __SINK_CLASS__Transaction): string {
    return transaction.id;
  }

  private bufferOf(transaction: __SINK_CLASS__Transaction): IN[] {
    const buffer = this.buffers.get(transaction.id);
    if (buffer === undefined) throw new Error(`transaction ${transaction.id} is not open in this process`);
    return buffer;
  }

  private stagedPath(transaction: __SINK_CLASS__Transaction): string {
    return join(this.stagingDirectory, `${transaction.subtaskIndex}-${transaction.id}.jsonl`);
  }

  private committedPath(transaction: __SINK_CLASS__Transaction): string {
    return join(this.directory, `${transaction.subtaskIndex}-${transaction.id}.jsonl`);
  }
}

/**
 * Everything committed in `directory`, as a reader sees it (staged records are not included).
 *
 * @example
 * ```ts
 * const orders = await readCommitted<Order>("out/orders");
 * ```
 */
export async function readCommitted<T>(directory: string): Promise<T[]> {
  const records: T[] = [];
  const files = await readdir(directory).catch(() => []);
  for (const file of files.filter((name) => name.endsWith(".jsonl")).sort()) {
    const text = await readFile(join(directory, file), "utf8");
    for (const line of text.split("\n")) if (line.length > 0) records.push(JSON.parse(line) as T);
  }
  return records;
}

/**
 * The staged files in `directory`'s `.staging` folder: transactions pre-committed or left behind but
 * not committed. After a run that ended cleanly it is empty (the contract suite's leak check).
 *
 * @example
 * ```ts
 * const leftOver = await listStagedFiles("out/orders");
 * ```
 */
export async function listStagedFiles(directory: string): Promise<string[]> {
  const files = await readdir(join(directory, ".staging")).catch(() => []);
  return files.filter((name) => name.endsWith(".jsonl")).sort();
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
