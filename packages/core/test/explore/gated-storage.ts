import type {
  CheckpointHistoryEntry,
  CheckpointMetadata,
  CheckpointStorage,
  ClaimIncarnationOptions,
  CompletedCheckpoint,
  IncarnationSeries,
} from "../../src/index.js";
import { CheckpointError } from "../../src/index.js";
import type { ProcessGate } from "./process-gate.js";

/** What the next `store` of a process does: land at once, fail, or wait for the model (`hold`). */
export type StoreOutcome = "land" | "fail" | "hold";

/** Told of what a process's storage calls achieved, in the order they achieved it. */
export interface StorageObserver {
  claimed?(scope: string, incarnation: number): void;
  stored?(scope: string, checkpointId: number): void;
}

/** A store waiting for the model to let it land or fail. */
interface HeldStore {
  readonly checkpointId: number;
  readonly release: (outcome: "land" | "fail") => void;
}

/**
 * One process's view of the shared checkpoint storage: every call goes through the process's
 * {@link ProcessGate}, and each `store` takes the next planned {@link StoreOutcome} — so a store can
 * be slow (held, then landed), fail, or land after the coordinator's timeout (held beyond it).
 *
 * @example
 * ```ts
 * const storage = new GatedStorage(shared, gate);
 * storage.plan("hold");
 * // … later, after the checkpoint timed out:
 * storage.releaseHeld("land");
 * ```
 */
export class GatedStorage implements CheckpointStorage {
  readonly description: string;
  private readonly planned: StoreOutcome[] = [];
  private readonly held: HeldStore[] = [];
  /** Ids whose store this wrapper failed on purpose. */
  readonly failedIds: number[] = [];
  /** Stores begun so far (held ones included), and those that have ended (landed or failed). */
  storeCalls = 0;
  storesEnded = 0;

  constructor(
    private readonly shared: CheckpointStorage,
    private readonly gate: ProcessGate,
    private readonly observer: StorageObserver = {},
  ) {
    this.description = `gated:${shared.description}`;
  }

  /** Plans the outcome of the next store that has no outcome planned yet. */
  plan(outcome: StoreOutcome): void {
    this.planned.push(outcome);
  }

  get heldCount(): number {
    return this.held.length;
  }

  /** Lets the oldest held store land or fail; false when none is held. */
  releaseHeld(outcome: "land" | "fail"): boolean {
    const store = this.held.shift();
    store?.release(outcome);
    return store !== undefined;
  }

  async store(checkpoint: CompletedCheckpoint): Promise<void> {
    await this.gate.whenOpen();
    this.storeCalls++;
    try {
      await this.storeAsPlanned(checkpoint);
    } finally {
      this.storesEnded++;
    }
  }

  private async storeAsPlanned(checkpoint: CompletedCheckpoint): Promise<void> {
    const checkpointId = checkpoint.metadata.checkpointId;
    let outcome: StoreOutcome = this.planned.shift() ?? "land";
    if (outcome === "hold") {
      outcome = await new Promise<"land" | "fail">((release) => this.held.push({ checkpointId, release }));
    }
    if (outcome === "fail") {
      this.failedIds.push(checkpointId);
      await this.gate.whenOpen();
      throw new CheckpointError("CHECKPOINT_FAILED", `injected failure storing checkpoint ${checkpointId}`, {
        checkpointId,
      });
    }
    await this.gate.pass(async () => {
      await this.shared.store(checkpoint);
      this.observer.stored?.(checkpoint.metadata.scope, checkpointId);
    });
  }

  list(jobId: string): Promise<CheckpointMetadata[]> {
    return this.gate.pass(() => this.shared.list(jobId));
  }

  load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint> {
    return this.gate.pass(() => this.shared.load(jobId, scope, checkpointId));
  }

  discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    return this.gate.pass(() => this.shared.discard(jobId, scope, checkpointId));
  }

  claimedScopes(jobId: string): Promise<string[]> {
    return this.gate.pass(() => this.shared.claimedScopes(jobId));
  }

  describeIncarnations(jobId: string): Promise<IncarnationSeries> {
    // Not a step of the model: it changes nothing in the storage.
    return this.shared.describeIncarnations(jobId);
  }

  // Not steps of the model: the history is never what a checkpoint depends on.
  recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    return this.shared.recordHistory(entry, keep);
  }

  readHistory(jobId: string): Promise<CheckpointHistoryEntry[]> {
    return this.shared.readHistory(jobId);
  }

  claimIncarnation(jobId: string, scope: string, options?: ClaimIncarnationOptions): Promise<number> {
    return this.gate.pass(async () => {
      const incarnation = await this.shared.claimIncarnation(jobId, scope, options);
      this.observer.claimed?.(scope, incarnation);
      return incarnation;
    });
  }
}
