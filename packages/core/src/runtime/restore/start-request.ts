import type { CheckpointMetadata, CheckpointStorage } from "../../checkpoint/checkpoint-storage.js";
import { CheckpointError } from "../../errors/onceflow-error.js";
import type { SubtaskSnapshot } from "../subtask.js";
import {
  BASE_SCOPE,
  keyOf,
  lineageOf,
  loadSnapshots,
  type StartRequest,
  scopeOf,
  startRequestOf,
} from "./lineage.js";

/** True when both name the same start: both `"none"`, or the same checkpoint id. */
export function sameStartRequest(left: StartRequest, right: StartRequest): boolean {
  if (left === "none" || right === "none") return left === right;
  return left.checkpointId === right.checkpointId;
}

/** For logs and messages: `restore "none"` or `restore of checkpoint 7`. */
export function describeStartRequest(request: StartRequest): string {
  return request === "none" ? 'restore "none"' : `restore of checkpoint ${request.checkpointId}`;
}

/**
 * The lineage base that already applied `request`, if the current lineage's base carries it: a
 * process started again with the same arguments (a pod restart) or a sibling of the process that
 * applied it then goes on from the latest checkpoint of that line instead of applying it again.
 */
export function appliedBy(
  base: CheckpointMetadata | undefined,
  request: StartRequest,
): CheckpointMetadata | undefined {
  const carried = startRequestOf(base);
  return carried !== undefined && sameStartRequest(carried, request) ? base : undefined;
}

/**
 * Where checkpoint `checkpointId` is listed: in this process's scope, `all`, `base`, or another
 * subtask's scope. Throws `CHECKPOINT_NOT_FOUND` when it is nowhere.
 */
export function findNamedCheckpoint(
  storage: CheckpointStorage,
  all: readonly CheckpointMetadata[],
  jobId: string,
  scope: string,
  checkpointId: number,
): CheckpointMetadata {
  const named = all.filter((metadata) => metadata.checkpointId === checkpointId);
  const chosen =
    named.find((metadata) => metadata.scope === scope) ??
    named.find((metadata) => metadata.scope === "all") ??
    named.find((metadata) => metadata.scope === BASE_SCOPE) ??
    named[0];
  if (chosen === undefined) {
    throw new CheckpointError(
      "CHECKPOINT_NOT_FOUND",
      `checkpoint ${checkpointId} of job '${jobId}' is not in ${storage.description}; list them with \`onceflow checkpoints list\``,
      { checkpointId },
    );
  }
  return chosen;
}

/** The state of every subtask at a named checkpoint, in the shape it was written in. */
export interface NamedState {
  /** The checkpoint the name was found as (the process's own scope, `all`, `base`, or another subtask's). */
  readonly named: CheckpointMetadata;
  readonly snapshots: SubtaskSnapshot[];
  readonly parallelism: number;
  /** The checkpoints the state comes from. */
  readonly usedCheckpoints: CheckpointMetadata[];
}

/**
 * Every subtask's state as of checkpoint `checkpointId`. A checkpoint of scope `all` or `base` holds
 * every subtask. With one process per subtask each subtask checkpoints on its own, so the job's state
 * at N is, per subtask, its newest checkpoint with an id up to N in N's lineage — or its share of
 * that lineage's base when it stored none (it never got further). A subtask whose checkpoints up to
 * N were all discarded already fails the restore: its state at N is gone.
 */
export async function stateAtCheckpoint(
  storage: CheckpointStorage,
  all: readonly CheckpointMetadata[],
  jobId: string,
  scope: string,
  checkpointId: number,
): Promise<NamedState> {
  const chosen = findNamedCheckpoint(storage, all, jobId, scope, checkpointId);
  if (chosen.scope === "all" || chosen.scope === BASE_SCOPE) {
    const snapshots = [...(await loadSnapshots(storage, chosen)).values()];
    return { named: chosen, snapshots, parallelism: chosen.parallelism, usedCheckpoints: [chosen] };
  }
  const lineage = lineageOf(chosen);
  const parallelism = chosen.parallelism;
  const base =
    lineage === 0
      ? undefined
      : all.find((metadata) => metadata.scope === BASE_SCOPE && metadata.checkpointId === lineage);
  const snapshots: SubtaskSnapshot[] = [];
  const usedCheckpoints: CheckpointMetadata[] = [];
  let baseSnapshots: Map<number, SubtaskSnapshot> | undefined;
  for (let index = 0; index < parallelism; index++) {
    const subtaskScope = scopeOf(index, parallelism, false);
    const ofScope = all.filter(
      (metadata) => metadata.scope === subtaskScope && lineageOf(metadata) === lineage,
    );
    const atPoint = ofScope
      .filter((metadata) => metadata.checkpointId <= checkpointId)
      .reduce<CheckpointMetadata | undefined>(
        (newest, metadata) =>
          newest === undefined || metadata.checkpointId > newest.checkpointId ? metadata : newest,
        undefined,
      );
    if (atPoint !== undefined) {
      const snapshot = (await loadSnapshots(storage, atPoint)).get(index);
      if (snapshot !== undefined) snapshots.push(snapshot);
      usedCheckpoints.push(atPoint);
      continue;
    }
    if (ofScope.length > 0) {
      const kept = ofScope.map(keyOf).join(", ");
      throw new CheckpointError(
        "CHECKPOINT_NOT_FOUND",
        `checkpoint ${checkpointId} of job '${jobId}' cannot be restored whole: subtask ${index} checkpoints on its own (scope '${subtaskScope}'), and its checkpoints up to ${checkpointId} were discarded already (kept: ${kept}); name a later checkpoint`,
        { checkpointId },
      );
    }
    if (base === undefined) continue; // it never stored a checkpoint in the first lineage: it starts empty
    if (baseSnapshots === undefined) {
      baseSnapshots = await loadSnapshots(storage, base);
      usedCheckpoints.push(base);
    }
    const share = baseSnapshots.get(index);
    if (share !== undefined) snapshots.push(share);
  }
  return { named: chosen, snapshots, parallelism, usedCheckpoints };
}
