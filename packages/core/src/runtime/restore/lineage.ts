import { deserialize } from "node:v8";
import type { CheckpointMetadata, CheckpointStorage } from "../../checkpoint/checkpoint-storage.js";
import type { SubtaskSnapshot } from "../subtask.js";

/**
 * A lineage is the run of checkpoints a job takes at one parallelism and deployment shape (one
 * process for all subtasks, or one process per subtask). It starts from a **base checkpoint** —
 * scope `"base"`, id = the lineage's number — that holds every subtask's state redistributed from
 * the previous lineage; the first lineage (number 0) starts empty and has no base. Checkpoints of a
 * lineage carry its number in `metadata.lineage` and have ids above its base.
 */
export const BASE_SCOPE = "base";

/** Parallelism and deployment shape: a change of either starts a new lineage. */
export interface LineageShape {
  readonly parallelism: number;
  /** One process runs every subtask (scope `"all"`), rather than one process per subtask. */
  readonly runsAllSubtasks: boolean;
}

/**
 * A restore that starts a lineage of its own, applied once: a fresh start (`"none"`) or a named
 * checkpoint. The lineage's base records it, and every later base of that line carries it on.
 */
export type StartRequest = "none" | { readonly checkpointId: number };

/** What a base checkpoint records about itself in `summary.base`. */
export interface BaseSummary {
  readonly runsAllSubtasks: boolean;
  /** The checkpoints it was derived from, as `scope#id`; none for a fresh start (an empty base). */
  readonly derivedFrom: readonly string[];
  /**
   * The newest start request applied in this line of lineages: the one that created this base, or
   * the one its predecessor carried (a rescale). Absent when none was applied.
   */
  readonly startedBy?: StartRequest;
}

/** The lineage that the job is in now, as the storage shows it. */
export interface CurrentLineage {
  readonly lineage: number;
  readonly shape: LineageShape;
  /** The lineage's base checkpoint (absent for lineage 0). */
  readonly base: CheckpointMetadata | undefined;
  /** The highest checkpoint id of the job in any scope: new ids continue after it. */
  readonly highestId: number;
}

/** The storage scope of a process: `all` when it runs every subtask. */
export function scopeOf(subtaskIndex: number, parallelism: number, runsAllSubtasks: boolean): string {
  return runsAllSubtasks ? "all" : `subtask-${subtaskIndex}-of-${parallelism}`;
}

/** The scopes the processes of a lineage write to. */
export function scopesOf(shape: LineageShape): string[] {
  if (shape.runsAllSubtasks) return ["all"];
  return Array.from({ length: shape.parallelism }, (_, index) => scopeOf(index, shape.parallelism, false));
}

export function lineageOf(metadata: CheckpointMetadata): number {
  return metadata.lineage ?? 0;
}

export function sameShape(left: LineageShape, right: LineageShape): boolean {
  return left.parallelism === right.parallelism && left.runsAllSubtasks === right.runsAllSubtasks;
}

/** The shape a checkpoint was written in. */
export function shapeOf(metadata: CheckpointMetadata): LineageShape {
  if (metadata.scope === BASE_SCOPE) {
    const base = metadata.summary.base as BaseSummary | undefined;
    return { parallelism: metadata.parallelism, runsAllSubtasks: base?.runsAllSubtasks ?? false };
  }
  return { parallelism: metadata.parallelism, runsAllSubtasks: metadata.scope === "all" };
}

/** The start request a lineage's base carries (see {@link BaseSummary.startedBy}). */
export function startRequestOf(base: CheckpointMetadata | undefined): StartRequest | undefined {
  return (base?.summary.base as BaseSummary | undefined)?.startedBy;
}

/** True for the empty base of a fresh start: restoring it is starting empty. */
export function isEmptyBase(base: CheckpointMetadata): boolean {
  return ((base.summary.base as BaseSummary | undefined)?.derivedFrom.length ?? 1) === 0;
}

export function keyOf(metadata: Pick<CheckpointMetadata, "scope" | "checkpointId">): string {
  return `${metadata.scope}#${metadata.checkpointId}`;
}

/**
 * The current lineage: the newest one — the highest lineage number, that is the newest base's id
 * (lineage 0 has none). A checkpoint of an older lineage never makes it current again, whatever its
 * id: a process of the old lineage that was still running when a start request or a rescale made the
 * new one may have stored it. Undefined when the job has no checkpoint.
 */
export function currentLineage(all: readonly CheckpointMetadata[]): CurrentLineage | undefined {
  let lineage: number | undefined;
  let highestId = 0;
  for (const metadata of all) {
    lineage = Math.max(lineage ?? 0, lineageOf(metadata));
    highestId = Math.max(highestId, metadata.checkpointId);
  }
  if (lineage === undefined) return undefined;
  let newest: CheckpointMetadata | undefined;
  for (const metadata of all) {
    if (lineageOf(metadata) !== lineage) continue;
    if (newest === undefined || metadata.checkpointId > newest.checkpointId) newest = metadata;
  }
  const base =
    lineage === 0
      ? undefined
      : all.find((metadata) => metadata.scope === BASE_SCOPE && metadata.checkpointId === lineage);
  // `newest` exists: `lineage` is the lineage of one of the checkpoints.
  return { lineage, shape: shapeOf(base ?? newest!), base, highestId };
}

/** The newest checkpoint of `scope` in `lineage`, by id. */
export function latestInScope(
  all: readonly CheckpointMetadata[],
  scope: string,
  lineage: number,
): CheckpointMetadata | undefined {
  let latest: CheckpointMetadata | undefined;
  for (const metadata of all) {
    if (metadata.scope !== scope || lineageOf(metadata) !== lineage) continue;
    if (latest === undefined || metadata.checkpointId > latest.checkpointId) latest = metadata;
  }
  return latest;
}

/** Loads a checkpoint's subtask snapshots, by subtask index. */
export async function loadSnapshots(
  storage: CheckpointStorage,
  metadata: CheckpointMetadata,
): Promise<Map<number, SubtaskSnapshot>> {
  const checkpoint = await storage.load(metadata.jobId, metadata.scope, metadata.checkpointId);
  const snapshots = new Map<number, SubtaskSnapshot>();
  for (const [index, bytes] of checkpoint.subtaskStates)
    snapshots.set(index, deserialize(bytes) as SubtaskSnapshot);
  return snapshots;
}

/**
 * The latest state of every subtask of a lineage: each subtask's newest checkpoint in the lineage,
 * or its share of the lineage's base when it has none (a process that never completed a checkpoint
 * in this lineage). Also returns the checkpoints it used.
 */
export async function lineageState(
  storage: CheckpointStorage,
  all: readonly CheckpointMetadata[],
  current: CurrentLineage,
): Promise<{ snapshots: SubtaskSnapshot[]; usedCheckpoints: CheckpointMetadata[] }> {
  const snapshots: SubtaskSnapshot[] = [];
  const usedCheckpoints: CheckpointMetadata[] = [];
  let baseSnapshots: Map<number, SubtaskSnapshot> | undefined;
  const loaded = new Map<string, Map<number, SubtaskSnapshot>>();
  for (let index = 0; index < current.shape.parallelism; index++) {
    const scope = scopeOf(index, current.shape.parallelism, current.shape.runsAllSubtasks);
    const latest = latestInScope(all, scope, current.lineage);
    if (latest !== undefined && latest.parallelism === current.shape.parallelism) {
      let bySubtask = loaded.get(keyOf(latest));
      if (bySubtask === undefined) {
        bySubtask = await loadSnapshots(storage, latest);
        loaded.set(keyOf(latest), bySubtask);
        usedCheckpoints.push(latest);
      }
      const snapshot = bySubtask.get(index);
      if (snapshot !== undefined) {
        snapshots.push(snapshot);
        continue;
      }
    }
    if (current.base === undefined) continue; // lineage 0: this subtask never stored anything
    if (baseSnapshots === undefined) {
      baseSnapshots = await loadSnapshots(storage, current.base);
      usedCheckpoints.push(current.base);
    }
    const share = baseSnapshots.get(index);
    if (share !== undefined) snapshots.push(share);
  }
  return { snapshots, usedCheckpoints };
}
