import { deserialize } from "node:v8";
import type { StreamNode } from "./stream-graph.js";
import type { SubtaskSnapshot } from "./subtask.js";

/**
 * A readable summary of a checkpoint for `onceflow checkpoints inspect`: the operators, the source
 * positions by split, and whether the bounded input had ended (stored in the checkpoint's metadata).
 *
 * @example
 * ```ts
 * const summary = checkpointSummaryOf(subtaskStates, nodes, false);
 * // { operators: [{ uid: "lines", kind: "source" }, …], splits: { "input.txt": { subtask: 0, … } } }
 * ```
 */
export function checkpointSummaryOf(
  states: ReadonlyMap<number, Buffer>,
  nodes: readonly StreamNode[],
  inputEnded: boolean,
): Record<string, unknown> {
  const splits: Record<string, unknown> = {};
  for (const [subtaskIndex, bytes] of states) {
    const snapshot = deserialize(bytes) as SubtaskSnapshot;
    for (const [uid, operator] of Object.entries(snapshot.operators)) {
      const source = nodes.find((node) => node.uid === uid)?.source;
      for (const entry of operator.splits ?? []) {
        const split = source?.splitSerializer
          ? source.splitSerializer.deserialize(entry.bytes)
          : deserialize(entry.bytes);
        splits[entry.splitKey] = { subtask: subtaskIndex, ...toJsonSafe(split) };
      }
    }
  }
  return {
    operators: nodes.map((node) => ({ uid: node.uid, kind: node.kind })),
    splits,
    // Tells a later run that restores this checkpoint that its bounded input had ended.
    ...(inputEnded ? { endedBy: "end-of-input" } : {}),
  };
}

function toJsonSafe(value: unknown): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify(value, (_key, item) => (typeof item === "bigint" ? item.toString() : item)),
  );
}
