import { serialize } from "node:v8";
import type { CheckpointMetadata, CheckpointStorage } from "../../checkpoint/checkpoint-storage.js";
import { createCompletedCheckpoint } from "../../checkpoint/completed-checkpoint.js";
import { fencingScopeOf, supersededError } from "../../checkpoint/incarnation.js";
import { CheckpointError } from "../../errors/onceflow-error.js";
import type { Source, SourceSplit } from "../../source/source.js";
import type { OperatorSnapshot } from "../operators/stream-operator.js";
import type { SubtaskSnapshot } from "../subtask.js";
import {
  BASE_SCOPE,
  type BaseSummary,
  type CurrentLineage,
  currentLineage,
  keyOf,
  type LineageShape,
  latestInScope,
  lineageOf,
  lineageState,
  loadSnapshots,
  sameShape,
  scopesOf,
  shapeOf,
} from "./lineage.js";
import { redistributeSnapshots } from "./redistribute-snapshots.js";

/**
 * Which checkpoint a job starts from: `"latest"` (default), `"none"` (start empty), or a named
 * checkpoint. See the restore rule in the core README.
 */
export type RestoreSetting = "latest" | "none" | { readonly checkpointId: number };

/** The state each subtask of this process starts with. */
export interface RestorePlan {
  /** The restored checkpoint's id (own checkpoint, or the lineage's base), or undefined on a fresh start. */
  readonly checkpointId: number | undefined;
  /** The highest checkpoint id of the job in any scope: new ids continue after it. */
  readonly highestStoredId: number;
  /** The lineage this process's checkpoints belong to. */
  readonly lineage: number;
  /** The checkpoints restored, for the log. */
  readonly restoredFrom: readonly CheckpointMetadata[];
  /** Set when a named checkpoint older than the job's newest was restored: its later output comes again. */
  readonly newerCheckpointId?: number;
  operatorsOf(subtaskIndex: number): Record<string, OperatorSnapshot> | undefined;
}

export interface RestoreRequest {
  readonly storage: CheckpointStorage;
  readonly jobId: string;
  /** This process's scope (it has claimed an incarnation of it already). */
  readonly scope: string;
  /**
   * The incarnation it claimed: a base checkpoint it writes carries it, so that a store of a process
   * superseded meanwhile (frozen during its restore, say) fails with `SUPERSEDED`.
   */
  readonly incarnation?: number;
  readonly shape: LineageShape;
  /**
   * Checks a new lineage's redistributed state (from the old subtasks' `from`) before it is stored:
   * throws to refuse state that no operator claims, or removes what is allowed to be dropped.
   */
  readonly claimRedistributed?: (
    perSubtask: Map<number, Record<string, OperatorSnapshot>>,
    from: readonly SubtaskSnapshot[],
  ) => void;
  readonly setting: RestoreSetting;
  readonly sources: ReadonlyMap<string, Source<unknown, SourceSplit>>;
}

/** Attempts at creating a lineage while other processes create or change it at the same moment. */
const MAX_LINEAGE_ATTEMPTS = 5;

const freshPlan = (highestStoredId: number, lineage: number): RestorePlan => ({
  checkpointId: undefined,
  highestStoredId,
  lineage,
  restoredFrom: [],
  operatorsOf: () => undefined,
});

/**
 * Picks the state this process starts with — the restore rule, the same in every process of a job
 * whatever their start order:
 *
 * 1. The current lineage is that of the checkpoint with the highest id (never the newest by clock).
 * 2. If it has this process's parallelism and shape: restore this scope's newest checkpoint of the
 *    lineage, or, when there is none yet, this process's share of the lineage's base checkpoint.
 * 3. Otherwise (a rescale or a change of shape) start a new lineage: fence every scope of the old one
 *    (no old process can store after this), take each old subtask's latest state, redistribute it,
 *    and store the result as the new lineage's base checkpoint (scope `"base"`, id = highest + 1). A
 *    process that loses the race to store it uses the winner's. Every process of the new parallelism
 *    then restores its share of that one base.
 *
 * A named checkpoint is looked up in this scope, then `"all"`, then `"base"` — never another
 * process's scope. `"none"` restores nothing.
 */
export async function planRestore(request: RestoreRequest): Promise<RestorePlan> {
  for (let attempt = 1; ; attempt++) {
    const all = await request.storage.list(request.jobId);
    const current = currentLineage(all);
    const plan = await planFrom(all, current, request);
    if (plan !== undefined) return plan;
    if (attempt >= MAX_LINEAGE_ATTEMPTS) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `job '${request.jobId}': the lineage changed ${attempt} times while this process was restoring: processes with different parallelisms or shapes keep starting. Stop the old deployment before starting the new one`,
      );
    }
  }
}

/** A plan, or undefined when another process changed the lineage meanwhile (then: look again). */
async function planFrom(
  all: readonly CheckpointMetadata[],
  current: CurrentLineage | undefined,
  request: RestoreRequest,
): Promise<RestorePlan | undefined> {
  const { setting } = request;
  const highestId = current?.highestId ?? 0;
  if (setting === "none") {
    const lineage = current !== undefined && sameShape(current.shape, request.shape) ? current.lineage : 0;
    return freshPlan(highestId, lineage);
  }
  if (typeof setting === "object") return planNamed(all, current, request, setting.checkpointId);
  if (current === undefined) {
    // No checkpoint yet, but processes of another shape may have started (and may still run).
    await fenceOtherShapes(request, []);
    return freshPlan(0, 0);
  }
  if (sameShape(current.shape, request.shape)) return planWithinLineage(all, current, request);
  const base = await createLineage(all, current, request, undefined);
  return base === undefined ? undefined : planFromBase(base);
}

async function planWithinLineage(
  all: readonly CheckpointMetadata[],
  current: CurrentLineage,
  request: RestoreRequest,
): Promise<RestorePlan> {
  const own = latestInScope(all, request.scope, current.lineage);
  if (own !== undefined) {
    refuseNewerWriter(own, request);
    const snapshots = await loadSnapshots(request.storage, own);
    return planFromSnapshots(own, snapshots, current.highestId, current.lineage);
  }
  if (current.base === undefined) return freshPlan(current.highestId, current.lineage);
  refuseNewerWriter(current.base, request);
  const snapshots = await loadSnapshots(request.storage, current.base);
  return planFromSnapshots(current.base, snapshots, current.highestId, current.lineage);
}

/**
 * Stops a zombie before it restores anything: a checkpoint of this process's own scope written by a
 * newer incarnation means a newer process took the scope over while this one was frozen between its
 * claim and its restore. Restoring it would recover that process's transactions — and abort the
 * open one it is still writing — under its feet.
 */
function refuseNewerWriter(restored: CheckpointMetadata, request: RestoreRequest): void {
  if (request.incarnation === undefined || restored.incarnation === undefined) return;
  if (fencingScopeOf(restored) !== request.scope) return;
  if (restored.incarnation > request.incarnation) {
    throw supersededError(
      { jobId: request.jobId, scope: request.scope, incarnation: request.incarnation },
      restored.incarnation,
    );
  }
}

function planFromSnapshots(
  restored: CheckpointMetadata,
  snapshots: ReadonlyMap<number, SubtaskSnapshot>,
  highestId: number,
  lineage: number,
): RestorePlan {
  return {
    checkpointId: restored.checkpointId,
    highestStoredId: Math.max(highestId, restored.checkpointId),
    lineage,
    restoredFrom: [restored],
    operatorsOf: (subtaskIndex) => snapshots.get(subtaskIndex)?.operators,
  };
}

/** A plan from a base checkpoint this process just stored: the lineage is the base's id. */
function planFromBase(base: {
  metadata: CheckpointMetadata;
  snapshots: Map<number, SubtaskSnapshot>;
}): RestorePlan {
  const { checkpointId } = base.metadata;
  return planFromSnapshots(base.metadata, base.snapshots, checkpointId, checkpointId);
}

async function planNamed(
  all: readonly CheckpointMetadata[],
  current: CurrentLineage | undefined,
  request: RestoreRequest,
  checkpointId: number,
): Promise<RestorePlan | undefined> {
  const named = all.filter((metadata) => metadata.checkpointId === checkpointId);
  const chosen =
    named.find((metadata) => metadata.scope === request.scope) ??
    named.find((metadata) => metadata.scope === "all") ??
    named.find((metadata) => metadata.scope === BASE_SCOPE);
  if (chosen === undefined) {
    const elsewhere = named.map((metadata) => metadata.scope);
    throw new CheckpointError(
      "CHECKPOINT_NOT_FOUND",
      `checkpoint ${checkpointId} of job '${request.jobId}' is not in ${request.storage.description} for scope '${request.scope}'${
        elsewhere.length > 0
          ? ` (it exists in ${elsewhere.map((scope) => `'${scope}'`).join(", ")}: a process restores only its own scope's checkpoints, "all" or a lineage base)`
          : ""
      }; list them with \`onceflow checkpoints list\``,
      { checkpointId },
    );
  }
  const highestId = current?.highestId ?? 0;
  const newer = highestId > checkpointId ? { newerCheckpointId: highestId } : {};
  refuseNewerWriter(chosen, request);
  if (sameShape(shapeOf(chosen), request.shape)) {
    const snapshots = await loadSnapshots(request.storage, chosen);
    return { ...planFromSnapshots(chosen, snapshots, highestId, lineageOf(chosen)), ...newer };
  }
  if (current === undefined) return undefined; // cannot happen: `chosen` is listed
  // Another shape: the same as a rescale from that checkpoint. Reuse the lineage a sibling process
  // already derived from it, so that every process of the new shape restores the same base.
  const derived = current.base?.summary.base as BaseSummary | undefined;
  if (
    current.base !== undefined &&
    sameShape(current.shape, request.shape) &&
    derived?.derivedFrom.length === 1 &&
    derived.derivedFrom[0] === keyOf(chosen)
  ) {
    const snapshots = await loadSnapshots(request.storage, current.base);
    return { ...planFromSnapshots(current.base, snapshots, highestId, current.lineage), ...newer };
  }
  const base = await createLineage(all, current, request, chosen);
  if (base === undefined) return undefined;
  return { ...planFromBase(base), ...newer };
}

/**
 * Fences every scope that is not one of this process's shape: the old lineage's (`oldScopes`) and
 * any other that ever had a process — also one that never stored a checkpoint — so that no process
 * of another parallelism or shape can store (and so commit) next to the new ones. Scopes of this
 * shape are the new lineage's siblings: never fenced here.
 */
async function fenceOtherShapes(request: RestoreRequest, oldScopes: readonly string[]): Promise<void> {
  const { storage, jobId } = request;
  const ours = new Set(scopesOf(request.shape));
  const others = new Set([...oldScopes, ...(await storage.claimedScopes(jobId))]);
  for (const scope of others) {
    if (!ours.has(scope)) await storage.claimIncarnation(jobId, scope);
  }
}

/**
 * Starts a new lineage for this process's shape: fences the old lineage's scopes, redistributes its
 * latest state (or the named checkpoint's) and stores it as the base. Undefined when another process
 * changed the storage meanwhile.
 */
async function createLineage(
  listed: readonly CheckpointMetadata[],
  listedLineage: CurrentLineage,
  request: RestoreRequest,
  from: CheckpointMetadata | undefined,
): Promise<{ metadata: CheckpointMetadata; snapshots: Map<number, SubtaskSnapshot> } | undefined> {
  const { storage, jobId } = request;
  // Fence the old processes first: from here on none of them can store, so what we read is final.
  await fenceOtherShapes(request, scopesOf(listedLineage.shape));
  const all = await storage.list(jobId);
  const current = currentLineage(all);
  if (
    current === undefined ||
    current.lineage !== listedLineage.lineage ||
    !sameShape(current.shape, listedLineage.shape) ||
    all.length !== listed.length
  ) {
    return undefined;
  }
  let oldSnapshots: SubtaskSnapshot[];
  let oldParallelism: number;
  let derivedFrom: CheckpointMetadata[];
  if (from !== undefined) {
    oldSnapshots = [...(await loadSnapshots(storage, from)).values()];
    oldParallelism = from.parallelism;
    derivedFrom = [from];
  } else {
    const state = await lineageState(storage, all, current);
    oldSnapshots = state.snapshots;
    oldParallelism = current.shape.parallelism;
    derivedFrom = state.usedCheckpoints;
  }
  oldSnapshots.sort((left, right) => left.subtaskIndex - right.subtaskIndex);
  const baseId = current.highestId + 1;
  const perSubtask = redistributeSnapshots(
    oldSnapshots,
    oldParallelism,
    request.shape.parallelism,
    request.sources,
  );
  request.claimRedistributed?.(perSubtask, oldSnapshots);
  const snapshots = new Map<number, SubtaskSnapshot>();
  const subtaskStates = new Map<number, Buffer>();
  for (let index = 0; index < request.shape.parallelism; index++) {
    const snapshot: SubtaskSnapshot = {
      formatVersion: 1,
      checkpointId: baseId,
      subtaskIndex: index,
      parallelism: request.shape.parallelism,
      operators: perSubtask.get(index) ?? {},
    };
    snapshots.set(index, snapshot);
    subtaskStates.set(index, serialize(snapshot));
  }
  const summary: { base: BaseSummary } = {
    base: { runsAllSubtasks: request.shape.runsAllSubtasks, derivedFrom: derivedFrom.map(keyOf) },
  };
  const checkpoint = createCompletedCheckpoint({
    jobId,
    checkpointId: baseId,
    scope: BASE_SCOPE,
    parallelism: request.shape.parallelism,
    subtaskStates,
    lineage: baseId,
    ...(request.incarnation === undefined
      ? {}
      : { incarnation: request.incarnation, incarnationScope: request.scope }),
    summary,
  });
  try {
    await storage.store(checkpoint);
  } catch (error) {
    // Lost the race to another process of the new shape: restore its base (looked up again).
    const stored = (await storage.list(jobId)).some(
      (metadata) => metadata.scope === BASE_SCOPE && metadata.checkpointId === baseId,
    );
    if (stored) return undefined;
    throw error;
  }
  return { metadata: checkpoint.metadata, snapshots };
}
