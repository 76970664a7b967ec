import {
  type CheckpointSplitPosition,
  type CheckpointTransaction,
  readSinkTransactions,
  splitPositionsOf,
} from "../checkpoint/checkpoint-contents.js";
import type {
  CheckpointHistoryEntry,
  CompletedCheckpointEntry,
} from "../checkpoint/checkpoint-history-entries.js";
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

/** A checkpoint that failed, as the storage's history recorded it (with the reason). */
export interface FailedCheckpoint {
  readonly checkpointId: number;
  readonly scope: string;
  readonly at: number;
  readonly reason: string;
  /** True when it can never be restored; false when whether its store landed was unknown. */
  readonly definitive: boolean;
}

/** A restore (a process start or an in-process restart that restored a checkpoint), from the history. */
export interface CheckpointRestore {
  readonly checkpointId: number;
  readonly scope: string;
  readonly at: number;
  readonly lineage: number;
  readonly incarnation: number | undefined;
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
  /** The retained checkpoints and those the history recorded before them (up to `checkpointing.history` per scope). */
  readonly checkpoints: readonly CheckpointPoint[];
  /** How many of `checkpoints` are still retained (restorable). */
  readonly retained: number;
  readonly missing: readonly MissingCheckpoint[];
  readonly failures: readonly FailedCheckpoint[];
  readonly restores: readonly CheckpointRestore[];
  readonly incarnations: readonly IncarnationSummary[];
  readonly claimedScopes: readonly string[];
  readonly latest: readonly LatestCheckpointContents[];
  /** Set when the storage knows nothing of the job: no checkpoint, no history, no incarnation. */
  readonly warning?: string;
}

/** A latest checkpoint's contents as loaded (the ages are computed at each read). */
type StoredContents = Omit<LatestCheckpointContents, "transactions"> & {
  readonly transactions: readonly CheckpointTransaction[];
};

// A longer run of missing ids is shown as its first ones only (the chart cannot show more anyway).
const MAX_MISSING_PER_GAP = 20;

/** The facts of one completed checkpoint, from its metadata or from a history entry. */
type CompletedFacts = Omit<CheckpointPoint, "afterRestart" | "durationMs">;

/**
 * Reads a job's checkpoint history from its storage for the dashboard: every completed checkpoint
 * (time, duration, size, incarnation) — the retained ones and those the storage's history keeps
 * after retention discarded them — the failures with their reasons, the restores, the ids that never
 * completed, the incarnations, and the contents of each scope's latest checkpoint. Read-only: it
 * only lists, loads and reads the history. The latest
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
    const recorded = await this.storage.readHistory(this.jobId);
    const claimedScopes = await this.storage.claimedScopes(this.jobId);
    const failures = recorded.filter((e) => e.kind === "failed").map(failureOf);
    const restores = recorded.filter((e) => e.kind === "restored").map(restoreOf);
    const failedIds = new Set(failures.map((f) => `${f.scope}#${f.checkpointId}`));
    const checkpoints: CheckpointPoint[] = [];
    const missing: MissingCheckpoint[] = [];
    const incarnations: IncarnationSummary[] = [];
    for (const [scope, facts] of groupByScope(mergeCompleted(listed, recorded))) {
      let previous: CompletedFacts | undefined;
      for (const m of facts) {
        const afterRestart = previous !== undefined && previous.incarnation !== m.incarnation;
        checkpoints.push({ ...m, durationMs: Math.max(0, m.completedAt - m.triggeredAt), afterRestart });
        if (previous !== undefined) {
          missing.push(
            ...missingBetween(previous, m).filter((g) => !failedIds.has(`${g.scope}#${g.checkpointId}`)),
          );
        }
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
            lineage: m.lineage,
            firstCheckpointId: m.checkpointId,
            lastCheckpointId: m.checkpointId,
            firstCompletedAt: m.completedAt,
            checkpoints: 1,
          });
        }
        previous = m;
      }
    }
    const latest: LatestCheckpointContents[] = [];
    const cache = new Map<string, StoredContents>();
    for (const metadata of latestOfEachScope(listed)) {
      const contents = await this.contentsOf(metadata);
      cache.set(keyOf(metadata), contents);
      latest.push({
        ...contents,
        transactions: contents.transactions.map((t) => ({ ...t, ageMs: Math.max(0, now - t.startedAt) })),
      });
    }
    this.cache = cache;
    checkpoints.sort((a, b) => a.completedAt - b.completedAt || a.checkpointId - b.checkpointId);
    const unknown = listed.length === 0 && recorded.length === 0 && claimedScopes.length === 0;
    return {
      jobId: this.jobId,
      storage: this.storage.description,
      generatedAt: now,
      checkpoints,
      retained: listed.length,
      missing,
      failures,
      restores,
      incarnations,
      claimedScopes,
      latest,
      ...(unknown ? { warning: await unknownJobWarning(this.storage, this.jobId) } : {}),
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

/**
 * Says that the storage knows nothing of `jobId` — a mistyped id shows an empty page otherwise —
 * naming the jobs it does know when it can list them (`FileSystemCheckpointStorage.listJobs`).
 *
 * @example
 * ```ts
 * await unknownJobWarning(filesystem("./checkpoints"), "ordres"); // "… known jobs: orders"
 * ```
 */
export async function unknownJobWarning(storage: CheckpointStorage, jobId: string): Promise<string> {
  const lister = (storage as { listJobs?: () => Promise<string[]> }).listJobs;
  const known = typeof lister === "function" ? await lister.call(storage).catch(() => undefined) : undefined;
  const which =
    known === undefined
      ? ""
      : known.length === 0
        ? "; it holds no job yet"
        : `; known jobs: ${known.join(", ")}`;
  return `${storage.description} has no checkpoint, checkpoint history or incarnation of job ${JSON.stringify(jobId)}: is the job id right${which}?`;
}

/** The completed checkpoints of both sources, one per scope and id (the metadata wins). */
function mergeCompleted(
  listed: readonly CheckpointMetadata[],
  recorded: readonly CheckpointHistoryEntry[],
): CompletedFacts[] {
  const byKey = new Map<string, CompletedFacts>();
  for (const entry of recorded) {
    if (entry.kind === "completed") byKey.set(`${entry.scope}#${entry.checkpointId}`, factsOfEntry(entry));
  }
  for (const m of listed) byKey.set(keyOf(m), factsOfMetadata(m));
  return [...byKey.values()];
}

function groupByScope(facts: readonly CompletedFacts[]): Map<string, CompletedFacts[]> {
  const byScope = new Map<string, CompletedFacts[]>();
  for (const fact of facts) {
    const list = byScope.get(fact.scope) ?? [];
    list.push(fact);
    byScope.set(fact.scope, list);
  }
  for (const list of byScope.values()) list.sort((a, b) => a.checkpointId - b.checkpointId);
  return new Map([...byScope].sort(([a], [b]) => a.localeCompare(b)));
}

function latestOfEachScope(listed: readonly CheckpointMetadata[]): CheckpointMetadata[] {
  const latest = new Map<string, CheckpointMetadata>();
  for (const m of listed) {
    const current = latest.get(m.scope);
    if (current === undefined || current.checkpointId < m.checkpointId) latest.set(m.scope, m);
  }
  return [...latest.values()].sort((a, b) => a.scope.localeCompare(b.scope));
}

function factsOfMetadata(m: CheckpointMetadata): CompletedFacts {
  return {
    checkpointId: m.checkpointId,
    scope: m.scope,
    triggeredAt: m.triggeredAt,
    completedAt: m.completedAt,
    sizeBytes: m.subtasks.reduce((sum, entry) => sum + entry.stateBytes, 0),
    parallelism: m.parallelism,
    isFinal: m.isFinal,
    incarnation: m.incarnation,
    lineage: m.lineage ?? 0,
  };
}

function factsOfEntry(entry: CompletedCheckpointEntry): CompletedFacts {
  return {
    checkpointId: entry.checkpointId,
    scope: entry.scope,
    triggeredAt: entry.triggeredAt,
    completedAt: entry.at,
    sizeBytes: entry.sizeBytes,
    parallelism: entry.parallelism,
    isFinal: entry.isFinal,
    incarnation: entry.incarnation,
    lineage: entry.lineage,
  };
}

function failureOf(entry: CheckpointHistoryEntry & { kind: "failed" }): FailedCheckpoint {
  const { checkpointId, scope, at, reason, definitive } = entry;
  return { checkpointId, scope, at, reason, definitive };
}

function restoreOf(entry: CheckpointHistoryEntry & { kind: "restored" }): CheckpointRestore {
  const { checkpointId, scope, at, lineage, incarnation } = entry;
  return { checkpointId, scope, at, lineage, incarnation };
}

// Ids only grow within a scope and are never reused by the attempts of one process, so an id
// between two stored ones was triggered and failed (or was fenced) — it never completed.
function missingBetween(before: CompletedFacts, after: CompletedFacts): MissingCheckpoint[] {
  const gap = after.checkpointId - before.checkpointId - 1;
  const missing: MissingCheckpoint[] = [];
  for (let offset = 1; offset <= Math.min(gap, MAX_MISSING_PER_GAP); offset++) {
    const at = before.completedAt + ((after.triggeredAt - before.completedAt) * offset) / (gap + 1);
    missing.push({ checkpointId: before.checkpointId + offset, scope: after.scope, at });
  }
  return missing;
}
