import {
  CheckpointError,
  type CheckpointHistoryEntry,
  type CheckpointMetadata,
  type CheckpointStorage,
  type ClaimIncarnationOptions,
  type CompletedCheckpoint,
  ConfigurationError,
  type IncarnationSeries,
} from "@onceflow/core";

/**
 * One call of `store` on a {@link FaultyCheckpointStorage}, as its fault options see it.
 *
 * @example
 * ```ts
 * const slowFinal = (attempt: StoreAttempt) => (attempt.metadata.isFinal ? 5_000 : 0);
 * ```
 */
export interface StoreAttempt {
  /** 1 for the first `store` call on this wrapper, 2 for the next … */
  readonly number: number;
  readonly checkpoint: CompletedCheckpoint;
  readonly metadata: CheckpointMetadata;
}

/**
 * How a released store ended: the wrapped storage's answer. A failed store is an outcome, not a
 * rejection, so a test may release a store without handling its error.
 *
 * @example
 * ```ts
 * const outcome = await held.release();
 * if (outcome.status === "failed") console.log(outcome.error);
 * ```
 */
export type StoreOutcome =
  | { readonly status: "stored" }
  | { readonly status: "failed"; readonly error: unknown };

/**
 * A store that a {@link FaultyCheckpointStorage} holds back: the caller's `store` promise is pending
 * and the wrapped storage has not been called. `release()` lets it land now — the wrapped storage
 * then decides, so a store held across a `claimIncarnation` is refused with `SUPERSEDED` as a late
 * store would be — and `fail()` rejects it without calling the wrapped storage.
 *
 * @example
 * ```ts
 * const held = await storage.nextHeldStore();
 * await coordinatorTimeout();          // the checkpoint is declared failed …
 * const outcome = await held.release(); // … and its store lands afterwards
 * ```
 */
export interface HeldStore {
  readonly attempt: StoreAttempt;
  /** True once released or failed. */
  readonly settled: boolean;
  /**
   * Calls the wrapped storage's `store` now; resolves with its outcome (the caller's promise settles
   * alike). Rejects with a `ConfigurationError` only if this store was already released or failed.
   */
  release(): Promise<StoreOutcome>;
  /** Rejects the caller's `store` with `error` (default: an injected `CHECKPOINT_FAILED`) without storing. */
  fail(error?: unknown): void;
}

/** How long a store takes before the wrapped storage is called: fixed milliseconds or per attempt. */
export type StoreLatency = number | ((attempt: StoreAttempt) => number);

/**
 * Faults of {@link faultyCheckpointStorage}. Each can be changed later with the wrapper's methods.
 *
 * @example
 * ```ts
 * const options: FaultyCheckpointStorageOptions = { latency: 200, failNextStores: 1, holdStores: (a) => a.metadata.checkpointId === 3 };
 * ```
 */
export interface FaultyCheckpointStorageOptions {
  /** Wait this long (ms) in every store before anything else happens. Default 0. */
  readonly latency?: StoreLatency;
  /** The next N stores fail (after their latency) without reaching the wrapped storage. */
  readonly failNextStores?: number;
  /** Stores for which this returns true fail (after their latency) without reaching the wrapped storage. */
  readonly failStoresWhen?: (attempt: StoreAttempt) => boolean;
  /** Stores to hold until released (see {@link HeldStore}): `true` for every store, or a predicate. */
  readonly holdStores?: boolean | ((attempt: StoreAttempt) => boolean);
  /** What an injected failure throws. Default: a `CheckpointError` `CHECKPOINT_FAILED` naming the checkpoint. */
  readonly createError?: (attempt: StoreAttempt) => unknown;
}

/**
 * What became of each `store` call, in call order.
 *
 * @example
 * ```ts
 * expect(storage.stores.map((s) => s.status)).toEqual(["stored", "injected-failure", "held"]);
 * ```
 */
export interface StoreRecord {
  readonly attempt: StoreAttempt;
  /** `waiting` (latency), `held`, `storing` (in the wrapped storage), or how it ended. */
  readonly status: "waiting" | "held" | "storing" | "stored" | "failed" | "injected-failure";
  readonly error?: unknown;
}

const sleep = (milliseconds: number): Promise<void> =>
  milliseconds > 0 ? new Promise((resolve) => setTimeout(resolve, milliseconds)) : Promise.resolve();

/**
 * A {@link CheckpointStorage} wrapped with faults, for tests of a job, a sink or a storage against a
 * slow or failing checkpoint store: latency per store, failing stores, and stores held until the
 * test (or a model) releases them — a store that lands after its timeout. `list`, `load`, `discard`,
 * `claimIncarnation` and `close` go straight to the wrapped storage; a held store calls the wrapped
 * `store` only when released, so whether it is still allowed to land (not fenced by a later claim)
 * is the wrapped storage's decision, as in production.
 *
 * Create it with {@link faultyCheckpointStorage}.
 *
 * @example
 * ```ts
 * const storage = faultyCheckpointStorage(new MemoryCheckpointStorage(), { holdStores: true });
 * const job = new Job({ jobId: "orders", checkpointing: { interval: 100, timeout: 500, storage } });
 * const held = await storage.nextHeldStore();   // checkpoint 1 is being stored …
 * // … let it time out, let the job re-claim, then:
 * await held.release();                          // lands late: SUPERSEDED if the claim fenced it
 * ```
 */
export class FaultyCheckpointStorage implements CheckpointStorage {
  readonly description: string;
  /** Every `store` call, in call order, with its current status. */
  readonly stores: StoreRecord[] = [];
  private latency: StoreLatency;
  private failuresLeft: number;
  private failWhen: ((attempt: StoreAttempt) => boolean) | undefined;
  private holdWhen: ((attempt: StoreAttempt) => boolean) | undefined;
  private readonly createError: (attempt: StoreAttempt) => unknown;
  private readonly held: HeldStore[] = [];
  private readonly heldWaiters: {
    matches: (held: HeldStore) => boolean;
    resolve: (held: HeldStore) => void;
  }[] = [];
  private storeCalls = 0;

  constructor(
    readonly storage: CheckpointStorage,
    options: FaultyCheckpointStorageOptions = {},
  ) {
    this.description = `faulty(${storage.description})`;
    this.latency = options.latency ?? 0;
    this.failuresLeft = options.failNextStores ?? 0;
    this.failWhen = options.failStoresWhen;
    this.holdWhen = holdPredicate(options.holdStores);
    this.createError = options.createError ?? injectedStoreError;
  }

  async store(checkpoint: CompletedCheckpoint): Promise<void> {
    this.storeCalls += 1;
    const attempt: StoreAttempt = { number: this.storeCalls, checkpoint, metadata: checkpoint.metadata };
    const index = this.stores.push({ attempt, status: "waiting" }) - 1;
    const mark = (status: StoreRecord["status"], error?: unknown): void => {
      this.stores[index] = error === undefined ? { attempt, status } : { attempt, status, error };
    };
    await sleep(typeof this.latency === "function" ? this.latency(attempt) : this.latency);
    if (this.failuresLeft > 0 || this.failWhen?.(attempt) === true) {
      if (this.failuresLeft > 0) this.failuresLeft -= 1;
      const error = this.createError(attempt);
      mark("injected-failure", error);
      throw error;
    }
    if (this.holdWhen?.(attempt) === true) {
      mark("held");
      return this.hold(attempt, mark);
    }
    return this.storeNow(attempt, mark);
  }

  list(jobId: string): Promise<CheckpointMetadata[]> {
    return this.storage.list(jobId);
  }

  load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint> {
    return this.storage.load(jobId, scope, checkpointId);
  }

  discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    return this.storage.discard(jobId, scope, checkpointId);
  }

  claimIncarnation(jobId: string, scope: string, options?: ClaimIncarnationOptions): Promise<number> {
    return options === undefined
      ? this.storage.claimIncarnation(jobId, scope)
      : this.storage.claimIncarnation(jobId, scope, options);
  }

  claimedScopes(jobId: string): Promise<string[]> {
    return this.storage.claimedScopes(jobId);
  }

  describeIncarnations(jobId: string): Promise<IncarnationSeries> {
    return this.storage.describeIncarnations(jobId);
  }

  /** Passed through: the history is never what a checkpoint depends on. */
  recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    return this.storage.recordHistory(entry, keep);
  }

  readHistory(jobId: string): Promise<CheckpointHistoryEntry[]> {
    return this.storage.readHistory(jobId);
  }

  async close(): Promise<void> {
    await this.storage.close?.();
  }

  /** Sets the latency of later stores (ms, or per attempt). */
  setLatency(latency: StoreLatency): this {
    this.latency = latency;
    return this;
  }

  /** The next `count` stores fail without reaching the wrapped storage. */
  failNextStores(count = 1): this {
    if (!Number.isInteger(count) || count < 0) {
      throw new ConfigurationError("failNextStores", `must be a whole number ≥ 0, got ${count}`);
    }
    this.failuresLeft = count;
    return this;
  }

  /** Later stores for which `predicate` returns true fail; `undefined` stops failing them. */
  failStoresWhen(predicate: ((attempt: StoreAttempt) => boolean) | undefined): this {
    this.failWhen = predicate;
    return this;
  }

  /** Holds later stores (all, or those matching) until released. Stores already running are not affected. */
  holdStores(predicate: boolean | ((attempt: StoreAttempt) => boolean) = true): this {
    this.holdWhen = holdPredicate(predicate);
    return this;
  }

  /** Stops holding later stores; stores already held stay held until released. */
  stopHoldingStores(): this {
    this.holdWhen = undefined;
    return this;
  }

  /** The stores held now (not yet released or failed), oldest first. */
  get heldStores(): readonly HeldStore[] {
    return this.held.filter((held) => !held.settled);
  }

  /**
   * Resolves with the first held store (not yet settled) that matches, now or when one is held.
   *
   * @example
   * ```ts
   * const held = await storage.nextHeldStore((a) => a.metadata.checkpointId === 2);
   * ```
   */
  nextHeldStore(predicate: (attempt: StoreAttempt) => boolean = () => true): Promise<HeldStore> {
    const matches = (held: HeldStore): boolean => !held.settled && predicate(held.attempt);
    const found = this.held.find(matches);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve) => this.heldWaiters.push({ matches, resolve }));
  }

  /**
   * Releases every held store (or those matching), oldest first, one after another; resolves with
   * their outcomes.
   */
  async releaseHeldStores(
    predicate: (attempt: StoreAttempt) => boolean = () => true,
  ): Promise<StoreOutcome[]> {
    const outcomes: StoreOutcome[] = [];
    for (const held of this.heldStores.filter((candidate) => predicate(candidate.attempt))) {
      outcomes.push(await held.release());
    }
    return outcomes;
  }

  private hold(
    attempt: StoreAttempt,
    mark: (status: StoreRecord["status"], error?: unknown) => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const held: HeldStore = {
        attempt,
        get settled() {
          return settled;
        },
        release: async () => {
          if (settled) throw alreadySettled(attempt);
          settled = true;
          try {
            await this.storeNow(attempt, mark);
            resolve();
            return { status: "stored" };
          } catch (error) {
            reject(error);
            return { status: "failed", error };
          }
        },
        fail: (error?: unknown) => {
          if (settled) throw alreadySettled(attempt);
          settled = true;
          const thrown = error ?? this.createError(attempt);
          mark("injected-failure", thrown);
          reject(thrown);
        },
      };
      this.held.push(held);
      for (const waiter of this.heldWaiters.filter((candidate) => candidate.matches(held))) {
        this.heldWaiters.splice(this.heldWaiters.indexOf(waiter), 1);
        waiter.resolve(held);
        break;
      }
    });
  }

  private async storeNow(
    attempt: StoreAttempt,
    mark: (status: StoreRecord["status"], error?: unknown) => void,
  ): Promise<void> {
    mark("storing");
    try {
      await this.storage.store(attempt.checkpoint);
      mark("stored");
    } catch (error) {
      mark("failed", error);
      throw error;
    }
  }
}

function holdPredicate(
  option: boolean | ((attempt: StoreAttempt) => boolean) | undefined,
): ((attempt: StoreAttempt) => boolean) | undefined {
  if (option === undefined || option === false) return undefined;
  return option === true ? () => true : option;
}

function injectedStoreError(attempt: StoreAttempt): CheckpointError {
  const { checkpointId, scope, jobId } = attempt.metadata;
  return new CheckpointError(
    "CHECKPOINT_FAILED",
    `injected failure of store ${attempt.number} (checkpoint ${checkpointId} of job '${jobId}' scope '${scope}') by faultyCheckpointStorage`,
    { checkpointId },
  );
}

function alreadySettled(attempt: StoreAttempt): ConfigurationError {
  return new ConfigurationError(
    "HeldStore",
    `the held store of checkpoint ${attempt.metadata.checkpointId} (store ${attempt.number}) was already released or failed; release or fail each held store once`,
  );
}

/**
 * Wraps any {@link CheckpointStorage} with faults: latency, failing stores and stores held until
 * released (see {@link FaultyCheckpointStorage}). For connector authors' tests as for onceflow's own.
 *
 * @example
 * ```ts
 * import { MemoryCheckpointStorage } from "@onceflow/core";
 * import { faultyCheckpointStorage } from "@onceflow/testkit";
 *
 * // Every store takes 2 s, the first one fails.
 * const storage = faultyCheckpointStorage(new MemoryCheckpointStorage(), { latency: 2_000, failNextStores: 1 });
 * ```
 */
export function faultyCheckpointStorage(
  storage: CheckpointStorage,
  options: FaultyCheckpointStorageOptions = {},
): FaultyCheckpointStorage {
  return new FaultyCheckpointStorage(storage, options);
}
