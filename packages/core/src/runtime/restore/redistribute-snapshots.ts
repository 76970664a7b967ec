import { RecoveryError } from "../../errors/onceflow-error.js";
import type { Source, SourceSplit } from "../../source/source.js";
import { type OperatorStateSnapshot, redistributeOperatorState } from "../../state/operator-state-store.js";
import { defaultSerializerFor } from "../../state/serializer.js";
import { SPLIT_KEY_SEPARATOR } from "../operators/source-operator.js";
import type { OperatorSnapshot } from "../operators/stream-operator.js";
import { assignSplit, stableHash } from "../split-assignment.js";
import type { SubtaskSnapshot } from "../subtask.js";

/**
 * Divides the state of the old subtasks among `parallelism` new ones (a rescale). Splits go to the
 * subtask that now owns them, keyed state and timers follow their split, `ListState` is dealt out
 * evenly and `UnionListState` goes to every subtask. With the parallelism unchanged every subtask
 * gets its own state back.
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
