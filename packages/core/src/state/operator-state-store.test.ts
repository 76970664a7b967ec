import { describe, expect, it } from "vitest";
import { ConfigurationError, RecoveryError } from "../errors/onceflow-error.js";
import {
  DefaultOperatorStateStore,
  type OperatorStateSnapshot,
  redistributeOperatorState,
} from "./operator-state-store.js";
import { defaultSerializer, jsonSerializer } from "./serializer.js";

const encode = (...values: unknown[]) => values.map((value) => defaultSerializer.serialize(value));
const decode = (elements: Buffer[] | undefined) =>
  (elements ?? []).map((bytes) => defaultSerializer.deserialize(bytes));

describe("DefaultOperatorStateStore", () => {
  it("keeps list state in memory and serializes it element by element in a snapshot", () => {
    const store = new DefaultOperatorStateStore();
    const offsets = store.getListState<bigint>({ name: "offsets" });
    offsets.add(1n);
    offsets.addAll([2n, 3n]);
    expect(offsets.get()).toEqual([1n, 2n, 3n]);

    const snapshot = store.snapshot();
    expect(snapshot.offsets?.mode).toBe("split");
    expect(snapshot.offsets?.elements).toHaveLength(3);
    expect(decode(snapshot.offsets?.elements)).toEqual([1n, 2n, 3n]);
  });

  it("hands out copies, replaces on update and empties on clear", () => {
    const store = new DefaultOperatorStateStore();
    const state = store.getListState<string>({ name: "names" });
    state.add("a");
    state.get().push("sneaky");
    expect(state.get()).toEqual(["a"]);
    state.update(["x", "y"]);
    expect(state.get()).toEqual(["x", "y"]);
    state.clear();
    expect(state.get()).toEqual([]);
    expect(store.snapshot().names?.elements).toEqual([]);
  });

  it("restores with the descriptor's serializer, lazily, and round-trips through a snapshot", () => {
    const first = new DefaultOperatorStateStore();
    first.getListState({ name: "json", serializer: jsonSerializer<{ id: number }>() }).add({ id: 7 });
    first.getUnionListState<string>({ name: "topics" }).addAll(["a", "b"]);
    const snapshot = first.snapshot();
    expect(snapshot.json?.elements[0]?.toString("utf8")).toBe('{"id":7}');
    expect(snapshot.topics?.mode).toBe("union");

    const restored = new DefaultOperatorStateStore(snapshot);
    expect(
      restored.getListState({ name: "json", serializer: jsonSerializer<{ id: number }>() }).get(),
    ).toEqual([{ id: 7 }]);
    expect(restored.getUnionListState<string>({ name: "topics" }).get()).toEqual(["a", "b"]);
  });

  it("returns the same state for the same name and mode", () => {
    const store = new DefaultOperatorStateStore();
    const first = store.getListState<number>({ name: "n" });
    first.add(1);
    expect(store.getListState<number>({ name: "n" }).get()).toEqual([1]);
  });

  it("carries over restored states that nobody asked for again, unchanged", () => {
    const restoredBytes = encode("kept");
    const store = new DefaultOperatorStateStore({ old: { mode: "union", elements: restoredBytes } });
    store.getListState<number>({ name: "new" }).add(1);
    const snapshot = store.snapshot();
    expect(snapshot.old).toEqual({ mode: "union", elements: restoredBytes });
    expect(decode(snapshot.new?.elements)).toEqual([1]);
    expect(store.stateNames()).toEqual(["new", "old"]);
  });

  it("rejects a name registered with both modes", () => {
    const store = new DefaultOperatorStateStore();
    store.getListState({ name: "twice" });
    expect(() => store.getUnionListState({ name: "twice" })).toThrow(ConfigurationError);
  });

  it("rejects a restored name asked for with the other mode", () => {
    const store = new DefaultOperatorStateStore({ s: { mode: "split", elements: [] } });
    expect(() => store.getUnionListState({ name: "s" })).toThrow(/getListState.*getUnionListState/);
  });

  it("rejects an empty name", () => {
    expect(() => new DefaultOperatorStateStore().getListState({ name: "" })).toThrow(ConfigurationError);
  });

  it("reports undeserializable restored elements as a RecoveryError naming the state", () => {
    const store = new DefaultOperatorStateStore({ bad: { mode: "split", elements: [Buffer.from("{nope")] } });
    const attempt = () => store.getListState({ name: "bad", serializer: jsonSerializer() });
    expect(attempt).toThrow(RecoveryError);
    expect(attempt).toThrow(/'bad'/);
  });
});

describe("redistributeOperatorState", () => {
  const split = (...values: unknown[]) => ({ mode: "split" as const, elements: encode(...values) });
  const union = (...values: unknown[]) => ({ mode: "union" as const, elements: encode(...values) });
  const old: OperatorStateSnapshot[] = [
    { items: split("a", "b", "c"), all: union("x") },
    { items: split("d", "e"), all: union("y") },
  ];

  it("deals split elements evenly in contiguous runs when scaling out", () => {
    const result = redistributeOperatorState(old, 3);
    expect(result.map((snapshot) => decode(snapshot.items?.elements))).toEqual([
      ["a", "b"],
      ["c", "d"],
      ["e"],
    ]);
  });

  it("gives everything to the one subtask when scaling in", () => {
    const [only, ...rest] = redistributeOperatorState(old, 1);
    expect(rest).toEqual([]);
    expect(decode(only?.items?.elements)).toEqual(["a", "b", "c", "d", "e"]);
  });

  it("gives every subtask all union elements", () => {
    for (const snapshot of redistributeOperatorState(old, 3)) {
      expect(snapshot.all?.mode).toBe("union");
      expect(decode(snapshot.all?.elements)).toEqual(["x", "y"]);
    }
  });

  it("keeps each subtask's split elements where they were when the parallelism is unchanged", () => {
    const result = redistributeOperatorState(old, 2);
    expect(result.map((snapshot) => decode(snapshot.items?.elements))).toEqual([
      ["a", "b", "c"],
      ["d", "e"],
    ]);
  });

  it("names every state in every new snapshot, even when a subtask gets no elements", () => {
    const result = redistributeOperatorState([{ items: split("only") }], 3);
    expect(result.map((snapshot) => snapshot.items?.elements.length)).toEqual([1, 0, 0]);
    expect(result.every((snapshot) => snapshot.items?.mode === "split")).toBe(true);
  });

  it("loses and duplicates nothing for any parallelism", () => {
    const many: OperatorStateSnapshot[] = [0, 1, 2].map((subtask) => ({
      items: split(...Array.from({ length: subtask * 3 + 1 }, (_, index) => `${subtask}-${index}`)),
    }));
    const expected = many.flatMap((snapshot) => decode(snapshot.items?.elements));
    for (let parallelism = 1; parallelism <= 15; parallelism++) {
      const result = redistributeOperatorState(many, parallelism);
      const sizes = result.map((snapshot) => snapshot.items?.elements.length ?? 0);
      expect(result.flatMap((snapshot) => decode(snapshot.items?.elements))).toEqual(expected);
      // An unchanged parallelism keeps the old (uneven) assignment on purpose.
      if (parallelism !== many.length) expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    }
  });

  it("rejects a name stored with different modes and a bad parallelism", () => {
    expect(() => redistributeOperatorState([{ s: split(1) }, { s: union(2) }], 2)).toThrow(RecoveryError);
    expect(() => redistributeOperatorState(old, 0)).toThrow(ConfigurationError);
    expect(() => redistributeOperatorState(old, 1.5)).toThrow(ConfigurationError);
  });
});
