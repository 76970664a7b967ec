import { RecoveryError } from "../../errors/onceflow-error.js";
import type { Source, SourceSplit } from "../../source/source.js";
import { operatorIndexForKeyGroup } from "../../state/key-groups.js";
import { type OperatorStateSnapshot, redistributeOperatorState } from "../../state/operator-state-store.js";
import { defaultSerializerFor } from "../../state/serializer.js";
import { SPLIT_KEY_SEPARATOR } from "../operators/source-operator.js";
import type { OperatorSnapshot } from "../operators/stream-operator.js";
import { assignSplit, stableHash } from "../split-assignment.js";
import type { SubtaskSnapshot } from "../subtask.js";

/**
 * Divides the state of the old subtasks among `parallelism` new ones (a rescale). Splits go to the
 * subtask that now owns them; keyed state and timers go per key group to the subtask that now owns
 * the key group (from every old subtask that held it), or, for an operator after
 * `reinterpretAsKeyedStream` (or a checkpoint written before key groups), follow their split;
 * `ListState` is dealt out evenly and `UnionListState` goes to every subtask. With the parallelism
 * unchanged every subtask gets its own state back.
 */
export function redistributeSnapshots(
  oldSubtasks: readonly SubtaskSnapshot[],
  oldParallelism: number,
  parallelism: number,
  sources: ReadonlyMap<string, Source<unknown, SourceSplit>>,
): Map<number, Record<string, OperatorSnapshot>> {
  if (oldParallelism === parallelism) {
    return new Map(oldSubtasks.map((snapshot) => [snapshot.subtaskIndex, snapshot.operators]));
  }
  return redistribute(oldSubtasks, oldParallelism, { parallelism, sources });
}

/**
 * The old subtasks' snapshots with every `UnionListState` counted once across the shares of a base.
 * A base (the state a rescale stored for its new shape) holds the whole union in each of its
 * shares; redistributing the shares as they are would give every new subtask the union once per old
 * subtask, and rescales in a row before a checkpoint completes would multiply it each time. The first
 * base share keeps its union elements; the other shares keep their other state.
 *
 * @example
 * ```ts
 * const old = unionStateOnce(snapshots, new Set([base.checkpointId]));
 * ```
 */
export function unionStateOnce(
  oldSubtasks: readonly SubtaskSnapshot[],
  baseCheckpointIds: ReadonlySet<number>,
): SubtaskSnapshot[] {
  let unionKept = false;
  return oldSubtasks.map((snapshot) => {
    if (!baseCheckpointIds.has(snapshot.checkpointId)) return snapshot;
    if (!unionKept) {
      unionKept = true;
      return snapshot;
    }
    const operators: Record<string, OperatorSnapshot> = {};
    for (const [uid, operator] of Object.entries(snapshot.operators)) {
      if (operator.operatorState === undefined) {
        operators[uid] = operator;
        continue;
      }
      const operatorState: OperatorStateSnapshot = {};
      for (const [name, entry] of Object.entries(operator.operatorState))
        operatorState[name] = entry.mode === "union" ? { mode: entry.mode, elements: [] } : entry;
      operators[uid] = { ...operator, operatorState };
    }
    return { ...snapshot, operators };
  });
}

interface RedistributionTarget {
  readonly parallelism: number;
  readonly sources: ReadonlyMap<string, Source<unknown, SourceSplit>>;
}

function redistribute(
  oldSubtasks: readonly SubtaskSnapshot[],
  oldParallelism: number,
  request: RedistributionTarget,
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
    // Every old subtask of a keyed operator wrote the same mode and maxParallelism.
    const keyedBy = perOld.find((snapshot) => snapshot?.keyedBy !== undefined);
    const maxParallelism = keyedBy?.maxParallelism;
    const ownerOfScope =
      keyedBy?.keyedBy === "key-group" && maxParallelism !== undefined
        ? (keyGroup: string): number =>
            operatorIndexForKeyGroup(maxParallelism, parallelism, Number(keyGroup))
        : owner;
    for (let index = 0; index < parallelism; index++) {
      const target: OperatorSnapshot = {};
      if (Object.keys(operatorStates[index] ?? {}).length > 0) target.operatorState = operatorStates[index]!;
      if (keyedBy?.keyedBy !== undefined) target.keyedBy = keyedBy.keyedBy;
      if (maxParallelism !== undefined) target.maxParallelism = maxParallelism;
      result.get(index)![uid] = target;
    }
    for (const snapshot of perOld) {
      if (!snapshot) continue;
      for (const entry of snapshot.splits ?? []) {
        const target = result.get(owner(entry.splitKey))![uid]!;
        target.splits = [...(target.splits ?? []), entry];
      }
      for (const field of ["keyed", "eventTimers", "processingTimers"] as const) {
        for (const [scope, value] of Object.entries(snapshot[field] ?? {})) {
          const target = result.get(ownerOfScope(scope))![uid]!;
          const bucket = (target[field] ?? {}) as Record<string, unknown>;
          target[field] = bucket as never;
          if (bucket[scope] !== undefined) {
            throw new RecoveryError(
              `${keyedBy?.keyedBy === "key-group" ? "key group" : "split"} '${scope}' of operator '${uid}' appears in two old subtasks`,
            );
          }
          bucket[scope] = value;
        }
      }
    }
  }
  return result;
}

function splitOwners(
  oldSubtasks: readonly SubtaskSnapshot[],
  request: RedistributionTarget,
): Map<string, number> {
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
