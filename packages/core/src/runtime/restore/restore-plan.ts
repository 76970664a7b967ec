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
  isEmptyBase,
  keyOf,
  type LineageShape,
  latestInScope,
  lineageState,
  loadSnapshots,
  type StartRequest,
  sameShape,
  scopesOf,
  startRequestOf,
} from "./lineage.js";
import { redistributeSnapshots, unionStateOnce } from "./redistribute-snapshots.js";
import { appliedBy, findNamedCheckpoint, stateAtCheckpoint } from "./start-request.js";

/**
 * Which checkpoint a job starts from: `"latest"` (default), `"none"` (start empty), or a named
 * checkpoint. `"none"` and a named checkpoint are applied once: they start a lineage of their own,
 * and a process started again with the same setting goes on from that lineage's latest checkpoint.
 * See the restore rule in the core README.
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
  /** Set when this process applied `"none"` or a named checkpoint: the lineage it started (its base's id). */
  readonly started?: { readonly request: StartRequest; readonly derivedFrom: readonly string[] };
  /**
   * Set when `"none"` or the named checkpoint had been applied already — the current lineage's base
   * carries it — so this process went on from the latest checkpoint of that lineage instead.
   */
  readonly alreadyApplied?: { readonly request: StartRequest; readonly baseCheckpointId: number };
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
  /**
   * Refuses (throws) state that no operator claims, without logging or changing anything: run on the
   * state as listed before the old processes are fenced, so that a refused start leaves them running.
   */
  readonly refuseUnclaimed?: (
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
 * 1. The current lineage is the newest one, the highest base id (never the newest by clock): a
 *    checkpoint of an older lineage never makes it current again, whatever its id.
 * 2. If it has this process's parallelism and shape: restore this scope's newest checkpoint of the
 *    lineage, or, when there is none yet, this process's share of the lineage's base checkpoint.
 * 3. Otherwise (a rescale or a change of shape) start a new lineage: fence every scope of the old one
 *    (no old process can store after this), take each old subtask's latest state, redistribute it,
 *    and store the result as the new lineage's base checkpoint (scope `"base"`, id = highest + 1). A
 *    process that loses the race to store it uses the winner's. Every process of the new parallelism
 *    then restores its share of that one base.
 * 4. `"none"` and a named checkpoint N start a new lineage too, whatever the shape — from empty state,
 *    or from every subtask's state at N — and its base records the request. A process whose request
 *    the current lineage's base already carries (a sibling, a restarted pod) follows rule 2 or 3
 *    instead: a start request is applied once.
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
  if (setting === "latest") return planLatest(all, current, request);
  const applied = appliedBy(current?.base, setting);
  if (applied === undefined) return planStart(all, current, request, setting);
  const plan = await planLatest(all, current, request);
  return plan && { ...plan, alreadyApplied: { request: setting, baseCheckpointId: applied.checkpointId } };
}

async function planLatest(
  all: readonly CheckpointMetadata[],
  current: CurrentLineage | undefined,
  request: RestoreRequest,
): Promise<RestorePlan | undefined> {
  if (current === undefined) {
    // No checkpoint yet, but processes of another shape may have started (and may still run).
    await fenceOtherShapes(request, []);
    return freshPlan(0, 0);
  }
  if (sameShape(current.shape, request.shape)) return planWithinLineage(all, current, request);
  const base = await createLineage(all, current, request, {
    startedBy: startRequestOf(current.base),
    state: async (latest, lineage) => {
      const state = await lineageState(request.storage, latest, lineage!);
      return { ...state, parallelism: lineage!.shape.parallelism };
    },
  });
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
  // No base, or the empty base of a fresh start: this process starts empty in the lineage.
  if (current.base === undefined || isEmptyBase(current.base)) {
    return freshPlan(current.highestId, current.lineage);
  }
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
  if (isEmptyBase(base.metadata)) return freshPlan(checkpointId, checkpointId);
  return planFromSnapshots(base.metadata, base.snapshots, checkpointId, checkpointId);
}

/**
 * Applies `"none"` or a named checkpoint: a new lineage for this process's shape whose base holds
 * empty state, or every subtask's state at the named checkpoint redistributed to this shape, and
 * records the request. Processes of other shapes are fenced, as on a rescale.
 */
async function planStart(
  all: readonly CheckpointMetadata[],
  current: CurrentLineage | undefined,
  request: RestoreRequest,
  start: StartRequest,
): Promise<RestorePlan | undefined> {
  const { storage, jobId, scope } = request;
  // A checkpoint that does not exist fails before anything is fenced.
  if (start !== "none") findNamedCheckpoint(storage, all, jobId, scope, start.checkpointId);
  let named: CheckpointMetadata | undefined;
  const base = await createLineage(all, current, request, {
    startedBy: start,
    state: async (latest) => {
      if (start === "none")
        return { snapshots: [], usedCheckpoints: [], parallelism: request.shape.parallelism };
      const state = await stateAtCheckpoint(storage, latest, jobId, scope, start.checkpointId);
      refuseNewerWriter(state.named, request);
      named = state.named;
      return state;
    },
  });
  if (base === undefined) return undefined;
  const summary = base.metadata.summary.base as BaseSummary;
  const plan = { ...planFromBase(base), started: { request: start, derivedFrom: summary.derivedFrom } };
  const highestId = current?.highestId ?? 0;
  if (named !== undefined && highestId > named.checkpointId) return { ...plan, newerCheckpointId: highestId };
  return plan;
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

/** Where a new lineage's state comes from, and the start request its base records. */
interface LineageOrigin {
  readonly startedBy: StartRequest | undefined;
  /** The old state, read once the old processes are fenced (`current` is undefined on an empty storage). */
  state(
    all: readonly CheckpointMetadata[],
    current: CurrentLineage | undefined,
  ): Promise<{ snapshots: SubtaskSnapshot[]; parallelism: number; usedCheckpoints: CheckpointMetadata[] }>;
}

/**
 * Starts a new lineage for this process's shape: fences the scopes of other shapes, redistributes the
 * state `origin` gives (the old lineage's latest, a named checkpoint's, or none) and stores it as the
 * base. Undefined when another process changed the storage meanwhile.
 */
async function createLineage(
  listed: readonly CheckpointMetadata[],
  listedLineage: CurrentLineage | undefined,
  request: RestoreRequest,
  origin: LineageOrigin,
): Promise<{ metadata: CheckpointMetadata; snapshots: Map<number, SubtaskSnapshot> } | undefined> {
  const { storage, jobId } = request;
  // Refuse unclaimed state before fencing: a refused start must leave the old deployment running.
  await refuseUnclaimedBeforeFencing(listed, listedLineage, request, origin);
  // Fence the old processes first: from here on none of them can store, so what we read is final.
  await fenceOtherShapes(request, listedLineage === undefined ? [] : scopesOf(listedLineage.shape));
  const all = await storage.list(jobId);
  const current = currentLineage(all);
  if (all.length !== listed.length) return undefined;
  if (
    listedLineage !== undefined &&
    (current === undefined ||
      current.lineage !== listedLineage.lineage ||
      !sameShape(current.shape, listedLineage.shape))
  ) {
    return undefined;
  }
  const old = await origin.state(all, current);
  const { oldSnapshots, perSubtask } = redistribute(old, request);
  const baseId = (current?.highestId ?? 0) + 1;
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
    base: {
      runsAllSubtasks: request.shape.runsAllSubtasks,
      derivedFrom: old.usedCheckpoints.map(keyOf),
      ...(origin.startedBy === undefined ? {} : { startedBy: origin.startedBy }),
    },
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

function redistribute(
  old: {
    snapshots: readonly SubtaskSnapshot[];
    parallelism: number;
    usedCheckpoints: readonly CheckpointMetadata[];
  },
  request: RestoreRequest,
): { oldSnapshots: SubtaskSnapshot[]; perSubtask: Map<number, Record<string, OperatorSnapshot>> } {
  const oldSnapshots = [...old.snapshots].sort((left, right) => left.subtaskIndex - right.subtaskIndex);
  const bases = new Set(
    old.usedCheckpoints.filter((used) => used.scope === BASE_SCOPE).map((used) => used.checkpointId),
  );
  const perSubtask = redistributeSnapshots(
    unionStateOnce(oldSnapshots, bases),
    old.parallelism,
    request.shape.parallelism,
    request.sources,
  );
  return { oldSnapshots, perSubtask };
}

/**
 * Runs {@link RestoreRequest.refuseUnclaimed} on the state as listed, before anything is fenced. The
 * old processes still run, so a checkpoint listed may be discarded meanwhile: when the state cannot
 * be read, the check is left to the final state, read once they are fenced.
 */
async function refuseUnclaimedBeforeFencing(
  listed: readonly CheckpointMetadata[],
  listedLineage: CurrentLineage | undefined,
  request: RestoreRequest,
  origin: LineageOrigin,
): Promise<void> {
  if (request.refuseUnclaimed === undefined) return;
  let old: Awaited<ReturnType<LineageOrigin["state"]>>;
  try {
    old = await origin.state(listed, listedLineage);
  } catch {
    return;
  }
  const { oldSnapshots, perSubtask } = redistribute(old, request);
  request.refuseUnclaimed(perSubtask, oldSnapshots);
}
