import type { CheckpointStorage } from "./checkpoint-storage.js";

/**
 * Retention of one scope after each checkpoint, without listing the storage each time: the first
 * retention lists the scope (what earlier runs left) and discards as `retainLatestCheckpoints`
 * does; from then on the checkpoints this process stores are added to what it knows, and what falls
 * out of the newest `retained` is discarded by id. Listing reads every retained checkpoint's
 * metadata, a few awaited reads that each wait for a turn of an event loop the subtasks keep busy:
 * with checkpoints every 50 ms it took longer than the checkpoint itself.
 *
 * It never discards more than listing would: what it knows is what listing showed plus what it
 * stored since, so a checkpoint it discards has `retained` newer ones in the storage. Whatever it
 * cannot know — a store whose fate was unknown and that landed after all, a failed discard — makes
 * it list again at the next retention (`forget`).
 *
 * @example
 * ```ts
 * const retention = new ScopeRetention(storage, "orders", "all", 3);
 * await storage.store(checkpoint);
 * retention.stored(checkpoint.metadata.checkpointId);
 * await retention.retain();
 * ```
 */
export class ScopeRetention {
  /** Checkpoint ids of the scope in the storage, ascending; undefined until listed (or forgotten). */
  private known: number[] | undefined;

  constructor(
    private readonly storage: CheckpointStorage,
    private readonly jobId: string,
    private readonly scope: string,
    private readonly retained: number,
  ) {}

  /** A checkpoint of the scope was stored by this process. */
  stored(checkpointId: number): void {
    const known = this.known;
    if (known === undefined || known.includes(checkpointId)) return;
    known.push(checkpointId);
    known.sort((a, b) => a - b);
  }

  /** What the storage holds is no longer known for sure: the next retention lists it. */
  forget(): void {
    this.known = undefined;
  }

  /** Discards what the newest `retained` checkpoints of the scope leave out, oldest first. */
  async retain(): Promise<void> {
    try {
      // `list` is ordered by id.
      this.known ??= (await this.storage.list(this.jobId))
        .filter((metadata) => metadata.scope === this.scope)
        .map((metadata) => metadata.checkpointId);
      const known = this.known;
      while (known.length > this.retained) {
        await this.storage.discard(this.jobId, this.scope, known[0] as number);
        known.shift();
      }
    } catch (error) {
      this.forget();
      throw error;
    }
  }
}
