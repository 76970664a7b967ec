import {
  type CheckpointSplitPosition,
  type CheckpointTransaction,
  readSinkTransactions,
  splitPositionsOf,
} from "../checkpoint/checkpoint-contents.js";
import type { CheckpointMetadata, CheckpointStorage } from "../checkpoint/checkpoint-storage.js";

/** One completed checkpoint as the dashboard charts it. */
export interface CheckpointPoint {
  readonly checkpointId: number;
  readonly scope: string;
  readonly triggeredAt: number;
  readonly completedAt: number;
  /** From trigger until every subtask's state was taken and the metadata written (ms). */
  readonly durationMs: number;
  readonly sizeBytes: number;
  readonly parallelism: number;
  readonly isFinal: boolean;
  readonly incarnation: number | undefined;
  readonly lineage: number;
  /**
   * True when the previous checkpoint of the scope was written by another incarnation: a restart or
   * restore came before it (or a failed store, which fences the writer's incarnation and claims a new one).
   */
  readonly afterRestart: boolean;
}

/** A checkpoint id that was triggered but never completed: its neighbours of the same scope were stored. */
export interface MissingCheckpoint {
  readonly checkpointId: number;
  readonly scope: string;
  /** Between the neighbours' times (ms since the epoch): where the chart marks it. */
  readonly at: number;
}

/** One incarnation (a process or an in-process restart) as seen in the checkpoints it wrote. */
export interface IncarnationSummary {
  readonly scope: string;
  readonly incarnation: number | undefined;
  readonly lineage: number;
  readonly firstCheckpointId: number;
  readonly lastCheckpointId: number;
  readonly firstCompletedAt: number;
  readonly checkpoints: number;
}

/** What the latest checkpoint of a scope holds: sink transactions (with their age) and split positions. */
export interface LatestCheckpointContents {
  readonly scope: string;
  readonly checkpointId: number;
  readonly completedAt: number;
  readonly transactions: readonly (CheckpointTransaction & { readonly ageMs: number })[];
  readonly splits: readonly CheckpointSplitPosition[];
  /** Why the state could not be read (a damaged checkpoint, state written by a tool), if so. */
  readonly problem: string | undefined;
}

/** The body of `/api/checkpoints`. */
export interface CheckpointHistory {
  readonly jobId: string;
  readonly storage: string;
  readonly generatedAt: number;
  readonly checkpoints: readonly CheckpointPoint[];
  readonly missing: readonly MissingCheckpoint[];
  readonly incarnations: readonly IncarnationSummary[];
  readonly claimedScopes: readonly string[];
  readonly latest: readonly LatestCheckpointContents[];
}

/** A latest checkpoint's contents as loaded (the ages are computed at each read). */
type StoredContents = Omit<LatestCheckpointContents, "transactions"> & {
  readonly transactions: readonly CheckpointTransaction[];
};

// A longer run of missing ids is shown as its first ones only (the chart cannot show more anyway).
const MAX_MISSING_PER_GAP = 20;

/**
 * Reads a job's checkpoint history from its storage for the dashboard: every completed checkpoint
 * (time, duration, size, incarnation), the ids that never completed, the incarnations, and the
 * contents of each scope's latest checkpoint. Read-only: it only lists and loads. The latest
 * checkpoints' contents are cached by id, so polling does not load the same state again.
 *
 * @example
 * ```ts
 * const history = new CheckpointHistoryReader(filesystem("./checkpoints"), "orders");
 * const { checkpoints, latest } = await history.read();
 * ```
 */
export class CheckpointHistoryReader {
  private cache = new Map<string, StoredContents>();

  constructor(
    private readonly storage: CheckpointStorage,
    private readonly jobId: string,
  ) {}

  async read(now: number = Date.now()): Promise<CheckpointHistory> {
    const listed = await this.storage.list(this.jobId);
    const claimedScopes = await this.storage.claimedScopes(this.jobId);
    const byScope = groupByScope(listed);
    const checkpoints: CheckpointPoint[] = [];
    const missing: MissingCheckpoint[] = [];
    const incarnations: IncarnationSummary[] = [];
    const latest: LatestCheckpointContents[] = [];
    const cache = new Map<string, StoredContents>();
    for (const [scope, metadata] of byScope) {
      let previous: CheckpointMetadata | undefined;
      for (const m of metadata) {
        const afterRestart = previous !== undefined && previous.incarnation !== m.incarnation;
        checkpoints.push(pointOf(m, afterRestart));
        if (previous !== undefined) missing.push(...missingBetween(previous, m));
        const current = incarnations.at(-1);
        if (current !== undefined && current.scope === scope && current.incarnation === m.incarnation) {
          incarnations[incarnations.length - 1] = {
            ...current,
            lastCheckpointId: m.checkpointId,
            checkpoints: current.checkpoints + 1,
          };
        } else {
          incarnations.push({
            scope,
            incarnation: m.incarnation,
            lineage: m.lineage ?? 0,
            firstCheckpointId: m.checkpointId,
            lastCheckpointId: m.checkpointId,
            firstCompletedAt: m.completedAt,
            checkpoints: 1,
          });
        }
        previous = m;
      }
      if (previous !== undefined) {
        const contents = await this.contentsOf(previous);
        cache.set(keyOf(previous), contents);
        latest.push({
          ...contents,
          transactions: contents.transactions.map((t) => ({ ...t, ageMs: Math.max(0, now - t.startedAt) })),
        });
      }
    }
    this.cache = cache;
    checkpoints.sort((a, b) => a.completedAt - b.completedAt || a.checkpointId - b.checkpointId);
    return {
      jobId: this.jobId,
      storage: this.storage.description,
      generatedAt: now,
      checkpoints,
      missing,
      incarnations,
      claimedScopes,
      latest,
    };
  }

  private async contentsOf(metadata: CheckpointMetadata): Promise<StoredContents> {
    const cached = this.cache.get(keyOf(metadata));
    if (cached !== undefined) return cached;
    const base = {
      scope: metadata.scope,
      checkpointId: metadata.checkpointId,
      completedAt: metadata.completedAt,
      splits: splitPositionsOf(metadata),
    };
    try {
      const checkpoint = await this.storage.load(this.jobId, metadata.scope, metadata.checkpointId);
      const { transactions, unreadableSubtasks } = readSinkTransactions(checkpoint);
      const problem =
        unreadableSubtasks.length === 0
          ? undefined
          : `the state of subtask(s) ${unreadableSubtasks.join(", ")} is not a onceflow subtask snapshot`;
      return { ...base, transactions, problem };
    } catch (error) {
      // Discarded by retention meanwhile, or damaged: show the history without its contents.
      return { ...base, transactions: [], problem: error instanceof Error ? error.message : String(error) };
    }
  }
}

function keyOf(metadata: CheckpointMetadata): string {
  return `${metadata.scope}#${metadata.checkpointId}`;
}

function groupByScope(listed: readonly CheckpointMetadata[]): Map<string, CheckpointMetadata[]> {
  const byScope = new Map<string, CheckpointMetadata[]>();
  for (const metadata of listed) {
    const list = byScope.get(metadata.scope) ?? [];
    list.push(metadata);
    byScope.set(metadata.scope, list);
  }
  for (const list of byScope.values()) list.sort((a, b) => a.checkpointId - b.checkpointId);
  return new Map([...byScope].sort(([a], [b]) => a.localeCompare(b)));
}

function pointOf(m: CheckpointMetadata, afterRestart: boolean): CheckpointPoint {
  return {
    checkpointId: m.checkpointId,
    scope: m.scope,
    triggeredAt: m.triggeredAt,
    completedAt: m.completedAt,
    durationMs: Math.max(0, m.completedAt - m.triggeredAt),
    sizeBytes: m.subtasks.reduce((sum, entry) => sum + entry.stateBytes, 0),
    parallelism: m.parallelism,
    isFinal: m.isFinal,
    incarnation: m.incarnation,
    lineage: m.lineage ?? 0,
    afterRestart,
  };
}

// Ids only grow within a scope and are never reused by the attempts of one process, so an id
// between two stored ones was triggered and failed (or was fenced) — it never completed.
function missingBetween(before: CheckpointMetadata, after: CheckpointMetadata): MissingCheckpoint[] {
  const gap = after.checkpointId - before.checkpointId - 1;
  const missing: MissingCheckpoint[] = [];
  for (let offset = 1; offset <= Math.min(gap, MAX_MISSING_PER_GAP); offset++) {
    const at = before.completedAt + ((after.triggeredAt - before.completedAt) * offset) / (gap + 1);
    missing.push({ checkpointId: before.checkpointId + offset, scope: after.scope, at });
  }
  return missing;
}
