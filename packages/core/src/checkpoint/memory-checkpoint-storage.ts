import { randomBytes } from "node:crypto";
import { CheckpointError } from "../errors/onceflow-error.js";
import {
  assertCheckpointId,
  assertCheckpointName,
  compareCheckpoints,
  describeCheckpoint,
  parseCheckpointMetadata,
  validateCheckpointForStore,
  verifySubtaskStates,
} from "./checkpoint-files.js";
import {
  assertHistorySize,
  type CheckpointHistoryEntry,
  compareHistoryEntries,
  validateHistoryEntry,
} from "./checkpoint-history-entries.js";
import type {
  CheckpointMetadata,
  CheckpointStorage,
  ClaimIncarnationOptions,
  CompletedCheckpoint,
  IncarnationSeries,
} from "./checkpoint-storage.js";
import { fencingScopeOf, supersededError } from "./incarnation.js";

interface StoredCheckpoint {
  /** Kept as JSON so every reader gets its own copy, as from the filesystem. */
  readonly metadataJson: string;
  readonly states: ReadonlyMap<number, Buffer>;
}

/**
 * Keeps checkpoints in the memory of this process: for tests (Flink's `JobManagerCheckpointStorage`).
 * Nothing survives the process. Buffers are copied on `store` and on `load`, so a caller that
 * changes a buffer afterwards cannot change what is stored; `load` still verifies the checksums.
 *
 * @example
 * ```ts
 * const storage = new MemoryCheckpointStorage();
 * const job = new Job({ jobId: "orders", checkpointing: { interval: 100, storage } });
 * ```
 */
export class MemoryCheckpointStorage implements CheckpointStorage {
  readonly description = "memory";
  private readonly checkpoints = new Map<string, StoredCheckpoint>();
  /** The newest incarnation of each `jobId/scope`, and the last number handed out per job. */
  private readonly newestIncarnation = new Map<string, number>();
  private readonly lastIncarnation = new Map<string, number>();
  /** One series per job and storage instance: a new instance is a reset storage. */
  private readonly series = new Map<string, string>();
  /** The checkpoint history of each `jobId/scope`, as JSON lines, oldest first. */
  private readonly history = new Map<string, string[]>();

  async store(checkpoint: CompletedCheckpoint): Promise<void> {
    const metadataJson = validateCheckpointForStore(checkpoint);
    const { metadata } = checkpoint;
    // Checked in the same synchronous step as the write: a claim cannot slip in between.
    const fencing = fencingScopeOf(metadata);
    const newest = this.newestIncarnation.get(`${metadata.jobId}/${fencing}`);
    if (metadata.incarnation !== undefined && newest !== undefined && metadata.incarnation < newest) {
      throw supersededError({ ...metadata, scope: fencing }, newest);
    }
    const key = keyOf(metadata.jobId, metadata.scope, metadata.checkpointId);
    if (this.checkpoints.has(key)) {
      throw new CheckpointError("CHECKPOINT_FAILED", `${describeCheckpoint(metadata)} already exists`, {
        checkpointId: metadata.checkpointId,
      });
    }
    const states = new Map<number, Buffer>();
    for (const [subtaskIndex, bytes] of checkpoint.subtaskStates)
      states.set(subtaskIndex, Buffer.from(bytes));
    this.checkpoints.set(key, { metadataJson, states });
  }

  async list(jobId: string): Promise<CheckpointMetadata[]> {
    assertCheckpointName("jobId", jobId);
    const found: CheckpointMetadata[] = [];
    for (const stored of this.checkpoints.values()) {
      const metadata = parseCheckpointMetadata(stored.metadataJson);
      if (metadata.jobId === jobId) found.push(metadata);
    }
    return found.sort(compareCheckpoints);
  }

  async load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint> {
    const stored = this.find(jobId, scope, checkpointId);
    const metadata = parseCheckpointMetadata(stored.metadataJson, checkpointId);
    const subtaskStates = new Map<number, Buffer>();
    for (const [subtaskIndex, bytes] of stored.states) subtaskStates.set(subtaskIndex, Buffer.from(bytes));
    verifySubtaskStates(metadata, subtaskStates, "CHECKPOINT_CORRUPT");
    return { metadata, subtaskStates };
  }

  /** Discarding a checkpoint that is not there does nothing, so retention may race harmlessly. */
  async discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    assertCheckpointId(checkpointId);
    this.checkpoints.delete(keyOf(jobId, scope, checkpointId));
  }

  async claimIncarnation(
    jobId: string,
    scope: string,
    options: ClaimIncarnationOptions = {},
  ): Promise<number> {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    const scopeKey = `${jobId}/${scope}`;
    const newest = this.newestIncarnation.get(scopeKey);
    if (options.after !== undefined && newest !== options.after) {
      throw supersededError({ jobId, scope }, newest ?? 0, options.after);
    }
    const incarnation = (this.lastIncarnation.get(jobId) ?? 0) + 1;
    this.lastIncarnation.set(jobId, incarnation);
    this.newestIncarnation.set(scopeKey, incarnation);
    return incarnation;
  }

  async describeIncarnations(jobId: string): Promise<IncarnationSeries> {
    assertCheckpointName("jobId", jobId);
    let series = this.series.get(jobId);
    if (series === undefined) {
      series = randomBytes(8).toString("hex");
      this.series.set(jobId, series);
    }
    return { series, newest: this.lastIncarnation.get(jobId) ?? 0 };
  }

  async recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    validateHistoryEntry(entry);
    assertHistorySize(keep);
    const key = `${entry.jobId}/${entry.scope}`;
    const entries = this.history.get(key) ?? [];
    entries.push(JSON.stringify(entry));
    if (entries.length > keep) entries.splice(0, entries.length - keep);
    this.history.set(key, entries);
  }

  async readHistory(jobId: string): Promise<CheckpointHistoryEntry[]> {
    assertCheckpointName("jobId", jobId);
    const prefix = `${jobId}/`;
    const found: CheckpointHistoryEntry[] = [];
    for (const [key, entries] of this.history) {
      if (key.startsWith(prefix))
        for (const line of entries) found.push(JSON.parse(line) as CheckpointHistoryEntry);
    }
    return found.sort(compareHistoryEntries);
  }

  async claimedScopes(jobId: string): Promise<string[]> {
    assertCheckpointName("jobId", jobId);
    const prefix = `${jobId}/`;
    return [...this.newestIncarnation.keys()]
      .filter((key) => key.startsWith(prefix))
      .map((key) => key.slice(prefix.length))
      .sort();
  }

  private find(jobId: string, scope: string, checkpointId: number): StoredCheckpoint {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    assertCheckpointId(checkpointId);
    const stored = this.checkpoints.get(keyOf(jobId, scope, checkpointId));
    if (stored === undefined) {
      throw new CheckpointError(
        "CHECKPOINT_NOT_FOUND",
        `${describeCheckpoint({ jobId, scope, checkpointId })} does not exist in memory`,
        { checkpointId },
      );
    }
    return stored;
  }
}

// Names cannot contain '/', so it separates the parts without ambiguity.
const keyOf = (jobId: string, scope: string, checkpointId: number): string =>
  `${jobId}/${scope}/${checkpointId}`;
