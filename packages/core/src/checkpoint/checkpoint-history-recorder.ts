import type { Logger } from "../observability/logger.js";
import type { CheckpointHistoryEntry } from "./checkpoint-history-entries.js";
import type { CheckpointStorage } from "./checkpoint-storage.js";

/**
 * Records the checkpoint history of one scope in its storage without making a checkpoint wait: each
 * entry is handed to `recordHistory` in the background, in order, one after another. A failure to
 * record is logged (at `warn` the first time, then at `debug`) and never fails a checkpoint — the
 * history is for people, not for restoring.
 * `flush` waits for what is still being written (at shutdown).
 *
 * @example
 * ```ts
 * const recorder = new CheckpointHistoryRecorder(storage, 100, logger);
 * recorder.record({ kind: "restored", jobId: "orders", scope: "all", checkpointId: 4, at: Date.now(), lineage: 0 });
 * await recorder.flush();
 * ```
 */
export class CheckpointHistoryRecorder {
  private writing: Promise<void> = Promise.resolve();
  private warned = false;

  constructor(
    private readonly storage: CheckpointStorage,
    private readonly keep: number,
    private readonly logger: Logger,
  ) {}

  record(entry: CheckpointHistoryEntry): void {
    this.writing = this.writing
      .then(() => this.storage.recordHistory(entry, this.keep))
      .catch((error: unknown) => {
        const level = this.warned ? "debug" : "warn";
        this.warned = true;
        this.logger[level](
          { checkpointId: entry.checkpointId, kind: entry.kind, err: error },
          "could not record the checkpoint history (the checkpoints themselves are not affected)",
        );
      });
  }

  /** Resolves once every entry recorded so far was written (or failed and was logged). */
  flush(): Promise<void> {
    return this.writing;
  }
}
