import { describe, expect, it } from "vitest";
import type { SubtaskSnapshot } from "../subtask.js";
import { redistributeSnapshots, unionStateOnce } from "./redistribute-snapshots.js";

// A base holds the whole union in each of its shares: rescaling from it again must not multiply the
// union by the base's parallelism (rescales in a row, each killed before its first checkpoint).

const element = (text: string) => Buffer.from(text);

function share(
  subtaskIndex: number,
  parallelism: number,
  checkpointId: number,
  union: string[],
): SubtaskSnapshot {
  return {
    formatVersion: 1,
    checkpointId,
    subtaskIndex,
    parallelism,
    operators: {
      out: {
        operatorState: {
          transactions: { mode: "union", elements: union.map(element) },
          splitState: { mode: "split", elements: [element(`own-${subtaskIndex}`)] },
        },
      },
    },
  };
}

const unionOf = (operators: Record<string, { operatorState?: Record<string, { elements: Buffer[] }> }>) =>
  operators.out?.operatorState?.transactions?.elements.map((bytes) => bytes.toString()) ?? [];

describe("union list state across rescales from a base", () => {
  it("takes the union once from a base's shares, and keeps every share's other state", () => {
    const base = [0, 1, 2].map((index) => share(index, 3, 9, ["a", "b"]));
    const once = unionStateOnce(base, new Set([9]));
    const perSubtask = redistributeSnapshots(once, 3, 2, new Map());
    for (const index of [0, 1]) expect(unionOf(perSubtask.get(index) ?? {})).toEqual(["a", "b"]);
    const split = [0, 1].flatMap((index) =>
      (perSubtask.get(index)?.out?.operatorState?.splitState?.elements ?? []).map((bytes) =>
        bytes.toString(),
      ),
    );
    expect(split.sort()).toEqual(["own-0", "own-1", "own-2"]);
  });

  it("stays the same size over rescales 2 → 3 → 1 → 2 that each store a base", () => {
    let snapshots = [share(0, 2, 5, ["t0"]), share(1, 2, 5, ["t1"])];
    let parallelism = 2;
    let bases = new Set<number>();
    for (const [step, next] of [3, 1, 2].entries()) {
      const perSubtask = redistributeSnapshots(
        unionStateOnce(snapshots, bases),
        parallelism,
        next,
        new Map(),
      );
      const baseId = 10 + step;
      snapshots = [...perSubtask].map(([index, operators]) => ({
        formatVersion: 1,
        checkpointId: baseId,
        subtaskIndex: index,
        parallelism: next,
        operators,
      }));
      bases = new Set([baseId]);
      parallelism = next;
      for (const snapshot of snapshots) expect(unionOf(snapshot.operators)).toEqual(["t0", "t1"]);
    }
  });

  it("leaves the union of regular checkpoints alone: each subtask wrote its own", () => {
    const regular = [share(0, 2, 12, ["t0"]), share(1, 2, 12, ["t1"])];
    const perSubtask = redistributeSnapshots(unionStateOnce(regular, new Set([9])), 2, 3, new Map());
    for (const index of [0, 1, 2]) expect(unionOf(perSubtask.get(index) ?? {})).toEqual(["t0", "t1"]);
  });
});
