import { deserialize } from "node:v8";
import type { CheckpointMetadata, CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { CheckpointError, RecoveryError } from "../errors/onceflow-error.js";
import type { Source, SourceSplit } from "../source/source.js";
import { type OperatorStateSnapshot, redistributeOperatorState } from "../state/operator-state-store.js";
import { defaultSerializerFor } from "../state/serializer.js";
import { SPLIT_KEY_SEPARATOR } from "./operators/source-operator.js";
import type { OperatorSnapshot } from "./operators/stream-operator.js";
import { assignSplit, stableHash } from "./split-assignment.js";
import type { SubtaskSnapshot } from "./subtask.js";

/** Which checkpoint a job starts from. */
export type RestoreSetting = "latest" | "none" | { readonly checkpointId: number };

/** The state each subtask of this process starts with. */
export interface RestorePlan {
  /** The highest restored checkpoint id, or undefined on a fresh start. */
  readonly checkpointId: number | undefined;
  /** The highest checkpoint id in storage for this scope, so new ids never collide. */
  readonly highestStoredId: number;
  /** The checkpoints restored, for the log. */
  readonly restoredFrom: readonly CheckpointMetadata[];
  operatorsOf(subtaskIndex: number): Record<string, OperatorSnapshot> | undefined;
}

export interface RestoreRequest {
  readonly storage: CheckpointStorage;
  readonly jobId: string;
  readonly scope: string;
  readonly parallelism: number;
  readonly setting: RestoreSetting;
  readonly sources: ReadonlyMap<string, Source<unknown, SourceSplit>>;
}

/**
 * Picks the checkpoint(s) to restore and divides their state among the new subtasks. With the
 * parallelism unchanged every subtask gets its own state back. Otherwise (rescale) splits go to
 * the subtask that now owns them, keyed state and timers follow their split, `ListState` is dealt
 * out evenly and `UnionListState` goes to every subtask.
 */
export async function planRestore(request: RestoreRequest): Promise<RestorePlan> {
  const all = await request.storage.list(request.jobId);
  const highestStoredId = all
    .filter((metadata) => metadata.scope === request.scope)
    .reduce((highest, metadata) => Math.max(highest, metadata.checkpointId), 0);
  const chosen = chooseCheckpoints(all, request);
  if (chosen.length === 0) {
    return { checkpointId: undefined, highestStoredId, restoredFrom: [], operatorsOf: () => undefined };
  }
  const oldSubtasks: SubtaskSnapshot[] = [];
  for (const metadata of chosen) {
    const checkpoint = await request.storage.load(metadata.jobId, metadata.scope, metadata.checkpointId);
    for (const [, bytes] of checkpoint.subtaskStates) oldSubtasks.push(deserialize(bytes) as SubtaskSnapshot);
  }
  oldSubtasks.sort((left, right) => left.subtaskIndex - right.subtaskIndex);
  const checkpointId = Math.max(...chosen.map((metadata) => metadata.checkpointId));
  const oldParallelism = chosen[0]!.parallelism;
  const perSubtask =
    oldParallelism === request.parallelism
      ? new Map(oldSubtasks.map((snapshot) => [snapshot.subtaskIndex, snapshot.operators]))
      : redistribute(oldSubtasks, oldParallelism, request);
  return {
    checkpointId,
    highestStoredId: Math.max(highestStoredId, checkpointId),
    restoredFrom: chosen,
    operatorsOf: (subtaskIndex) => perSubtask.get(subtaskIndex),
  };
}

function chooseCheckpoints(
  all: readonly CheckpointMetadata[],
  request: RestoreRequest,
): CheckpointMetadata[] {
  const { setting } = request;
  if (setting === "none") return [];
  if (typeof setting === "object") {
    const named = all.filter((metadata) => metadata.checkpointId === setting.checkpointId);
    const own =
      named.find((metadata) => metadata.scope === request.scope) ?? named.find((m) => m.scope === "all");
    if (!own && named.length === 0) {
      throw new CheckpointError(
        "CHECKPOINT_NOT_FOUND",
        `checkpoint ${setting.checkpointId} of job '${request.jobId}' is not in ${request.storage.description}; list them with \`onceflow checkpoints list\``,
        { checkpointId: setting.checkpointId },
      );
    }
    return own ? [own] : named;
  }
  if (all.length === 0) return [];
  // The newest checkpoint decides the old parallelism; with per-process scopes, take each old
  // subtask's newest checkpoint of that parallelism.
  const newest = all.reduce((latest, metadata) =>
    metadata.completedAt > latest.completedAt ? metadata : latest,
  );
  const own = latestOf(all.filter((metadata) => metadata.scope === request.scope));
  if (own && own.parallelism === request.parallelism && own.completedAt >= newest.completedAt) return [own];
  if (newest.scope === "all") return [newest];
  const chosen: CheckpointMetadata[] = [];
  for (let index = 0; index < newest.parallelism; index++) {
    const latest = latestOf(
      all.filter((metadata) => metadata.scope === scopeOf(index, newest.parallelism, false)),
    );
    if (latest) chosen.push(latest);
  }
  return chosen;
}

function latestOf(checkpoints: readonly CheckpointMetadata[]): CheckpointMetadata | undefined {
  return checkpoints.reduce<CheckpointMetadata | undefined>(
    (latest, metadata) => (!latest || metadata.checkpointId > latest.checkpointId ? metadata : latest),
    undefined,
  );
}

/** The storage scope of a process: `all` when it runs every subtask. */
export function scopeOf(subtaskIndex: number, parallelism: number, runsAllSubtasks: boolean): string {
  return runsAllSubtasks ? "all" : `subtask-${subtaskIndex}-of-${parallelism}`;
}

function redistribute(
  oldSubtasks: readonly SubtaskSnapshot[],
  oldParallelism: number,
  request: RestoreRequest,
): Map<number, Record<string, OperatorSnapshot>> {
  const { parallelism } = request;
  const result = new Map<number, Record<string, OperatorSnapshot>>();
  for (let index = 0; index < parallelism; index++) result.set(index, {});
  const uids = new Set(oldSubtasks.flatMap((snapshot) => Object.keys(snapshot.operators)));
  const ownerOfSplit = splitOwners(oldSubtasks, request);
  const owner = (splitKey: string): number =>
    ownerOfSplit.get(splitKey) ?? stableHash(splitIdOf(splitKey)) % parallelism;
  for (const uid of uids) {
    const perOld = Array.from(
      { length: oldParallelism },
      (_, index) => oldSubtasks.find((snapshot) => snapshot.subtaskIndex === index)?.operators[uid],
    );
    const operatorStates = redistributeOperatorState(
      perOld.map((snapshot) => snapshot?.operatorState ?? ({} as OperatorStateSnapshot)),
      parallelism,
    );
    for (let index = 0; index < parallelism; index++) {
      const target: OperatorSnapshot = {};
      if (Object.keys(operatorStates[index] ?? {}).length > 0) target.operatorState = operatorStates[index]!;
      result.get(index)![uid] = target;
    }
    for (const snapshot of perOld) {
      if (!snapshot) continue;
      for (const entry of snapshot.splits ?? []) {
        const target = result.get(owner(entry.splitKey))![uid]!;
        target.splits = [...(target.splits ?? []), entry];
      }
      for (const field of ["keyed", "eventTimers", "processingTimers"] as const) {
        for (const [splitKey, value] of Object.entries(snapshot[field] ?? {})) {
          const target = result.get(owner(splitKey))![uid]!;
          const bucket = (target[field] ?? {}) as Record<string, unknown>;
          target[field] = bucket as never;
          if (bucket[splitKey] !== undefined) {
            throw new RecoveryError(`split '${splitKey}' of operator '${uid}' appears in two old subtasks`);
          }
          bucket[splitKey] = value;
        }
      }
    }
  }
  return result;
}

function splitOwners(oldSubtasks: readonly SubtaskSnapshot[], request: RestoreRequest): Map<string, number> {
  const owners = new Map<string, number>();
  for (const snapshot of oldSubtasks) {
    for (const [uid, operator] of Object.entries(snapshot.operators)) {
      const source = request.sources.get(uid);
      if (!source) continue;
      const serializer = source.splitSerializer ?? defaultSerializerFor<SourceSplit>();
      for (const entry of operator.splits ?? []) {
        owners.set(
          entry.splitKey,
          assignSplit(source, serializer.deserialize(entry.bytes), request.parallelism),
        );
      }
    }
  }
  return owners;
}

function splitIdOf(splitKey: string): string {
  return splitKey.slice(splitKey.indexOf(SPLIT_KEY_SEPARATOR) + 1);
}
