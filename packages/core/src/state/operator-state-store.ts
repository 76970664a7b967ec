import { ConfigurationError, RecoveryError } from "../errors/onceflow-error.js";
import { defaultSerializerFor, type TypeSerializer } from "./serializer.js";
import type { ListState, OperatorStateStore, StateDescriptor } from "./state.js";

/**
 * How an operator state is handed out when a job is restored with another parallelism:
 * `split` (a `ListState`: the elements of all old subtasks are dealt evenly among the new ones) or
 * `union` (a `UnionListState`: every new subtask gets all elements).
 *
 * @example
 * ```ts
 * const mode: OperatorStateDistributionMode = snapshot["offsets"]?.mode ?? "split";
 * ```
 */
export type OperatorStateDistributionMode = "split" | "union";

/**
 * The raw operator state of one subtask, as stored in a checkpoint: per state name, its
 * distribution mode and its elements, each serialized on its own with the state's serializer
 * (so that a rescale can deal elements out without deserializing them).
 *
 * @example
 * ```ts
 * const snapshot: OperatorStateSnapshot = { offsets: { mode: "split", elements: [Buffer.from("…")] } };
 * ```
 */
export type OperatorStateSnapshot = Record<
  string,
  { mode: OperatorStateDistributionMode; elements: Buffer[] }
>;

/** One registered state: its live elements and how to write them back. */
interface RegisteredState {
  readonly mode: OperatorStateDistributionMode;
  readonly serializer: TypeSerializer<unknown>;
  readonly state: InMemoryListState<unknown>;
}

/** A `ListState` backed by an array; `get` hands out copies so callers cannot change it behind its back. */
class InMemoryListState<T> implements ListState<T> {
  private elements: T[];

  constructor(elements: T[]) {
    this.elements = elements;
  }

  get(): T[] {
    return [...this.elements];
  }

  add(value: T): void {
    this.elements.push(value);
  }

  addAll(values: readonly T[]): void {
    for (const value of values) this.elements.push(value);
  }

  update(values: readonly T[]): void {
    this.elements = [...values];
  }

  clear(): void {
    this.elements = [];
  }
}

/**
 * The in-memory operator state store of one subtask. It is built from the subtask's restored raw
 * state (empty on a fresh start); each state is deserialized when a function first asks for it with
 * its descriptor, and {@link DefaultOperatorStateStore.snapshot} serializes the current contents for
 * a checkpoint. Restored states that no function asked for again are carried over unchanged, so a
 * function that registers its state late (or not at all in one attempt) loses nothing.
 *
 * @example
 * ```ts
 * const store = new DefaultOperatorStateStore(restoredSnapshot);
 * const offsets = store.getListState<number>({ name: "offsets" });
 * offsets.add(42);
 * const forCheckpoint = store.snapshot(); // { offsets: { mode: "split", elements: [<Buffer …>] } }
 * ```
 */
export class DefaultOperatorStateStore implements OperatorStateStore {
  private readonly restored: OperatorStateSnapshot;
  private readonly registered = new Map<string, RegisteredState>();

  constructor(restored: OperatorStateSnapshot = {}) {
    this.restored = restored;
  }

  /**
   * A list state whose elements are split evenly among the subtasks on rescale.
   *
   * @example
   * ```ts
   * const pending = store.getListState<string>({ name: "pending" });
   * ```
   */
  getListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
    return this.register(descriptor, "split");
  }

  /**
   * A list state that every subtask receives whole on restore (the union of all subtasks' elements).
   *
   * @example
   * ```ts
   * const partitions = store.getUnionListState<string>({ name: "known-partitions" });
   * ```
   */
  getUnionListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
    return this.register(descriptor, "union");
  }

  /**
   * The names of every state this store holds: registered ones and restored ones not asked for yet.
   *
   * @example
   * ```ts
   * store.stateNames(); // ["offsets", "pending-transactions"]
   * ```
   */
  stateNames(): string[] {
    return [...new Set([...Object.keys(this.restored), ...this.registered.keys()])].sort();
  }

  /**
   * Serializes the current contents of every state, for a checkpoint. Restored states that were never
   * asked for again are carried over as they were restored.
   *
   * @example
   * ```ts
   * await sink.snapshotState({ checkpointId: 7, checkpointTimestamp: Date.now() });
   * const state = store.snapshot();
   * ```
   */
  snapshot(): OperatorStateSnapshot {
    const result: OperatorStateSnapshot = {};
    for (const [name, entry] of Object.entries(this.restored)) {
      if (!this.registered.has(name)) result[name] = { mode: entry.mode, elements: [...entry.elements] };
    }
    for (const [name, entry] of this.registered) {
      result[name] = {
        mode: entry.mode,
        elements: entry.state.get().map((element) => entry.serializer.serialize(element)),
      };
    }
    return result;
  }

  private register<T>(descriptor: StateDescriptor<T>, mode: OperatorStateDistributionMode): ListState<T> {
    const { name } = descriptor;
    if (typeof name !== "string" || name.length === 0) {
      throw new ConfigurationError("state.name", "an operator state needs a non-empty name");
    }
    const existing = this.registered.get(name);
    if (existing !== undefined) {
      if (existing.mode !== mode) throw modeConflict(name, existing.mode, mode, "was registered");
      return existing.state as unknown as ListState<T>;
    }
    const serializer = descriptor.serializer ?? defaultSerializerFor<T>();
    const restored = this.restored[name];
    if (restored !== undefined && restored.mode !== mode) {
      throw modeConflict(name, restored.mode, mode, "was restored");
    }
    const elements = (restored?.elements ?? []).map((bytes, index) => {
      try {
        return serializer.deserialize(bytes);
      } catch (error) {
        throw new RecoveryError(
          `cannot restore operator state '${name}': element ${index} does not deserialize with the state's serializer`,
          { cause: error, details: { stateName: name, elementIndex: index } },
        );
      }
    });
    const state = new InMemoryListState<T>(elements);
    this.registered.set(name, {
      mode,
      serializer: serializer as TypeSerializer<unknown>,
      state: state as InMemoryListState<unknown>,
    });
    return state;
  }
}

const modeApi = { split: "getListState", union: "getUnionListState" } as const;

function modeConflict(
  name: string,
  had: OperatorStateDistributionMode,
  wanted: OperatorStateDistributionMode,
  how: string,
): ConfigurationError {
  return new ConfigurationError(
    `state.${name}`,
    `operator state '${name}' ${how} with ${modeApi[had]} (mode '${had}') and is now asked for with ${modeApi[wanted]} (mode '${wanted}'): use one mode per state name, or give the new state another name`,
  );
}

/**
 * Deals the operator state of the old subtasks out to `newParallelism` new ones, for a restore with
 * another parallelism:
 *
 * - `split` states: the elements of all old subtasks, concatenated in subtask order, are cut into
 *   `newParallelism` contiguous runs whose sizes differ by at most one (the first subtasks get the
 *   extra elements). When the parallelism is unchanged every subtask keeps exactly its own elements.
 * - `union` states: every new subtask gets all elements of all old subtasks.
 *
 * Every new snapshot names every state (possibly with no elements), so each subtask learns the mode.
 * A state name that old subtasks stored with different modes is a {@link RecoveryError}.
 *
 * @example
 * ```ts
 * const [first, second, third] = redistributeOperatorState([subtask0, subtask1], 3);
 * ```
 */
export function redistributeOperatorState(
  oldSnapshots: readonly OperatorStateSnapshot[],
  newParallelism: number,
): OperatorStateSnapshot[] {
  if (!Number.isInteger(newParallelism) || newParallelism < 1) {
    throw new ConfigurationError(
      "parallelism",
      `must be a whole number of at least 1, got ${newParallelism}`,
    );
  }
  const result: OperatorStateSnapshot[] = Array.from({ length: newParallelism }, () => ({}));
  const modes = new Map<string, OperatorStateDistributionMode>();
  for (const [subtaskIndex, snapshot] of oldSnapshots.entries()) {
    for (const [name, entry] of Object.entries(snapshot)) {
      const known = modes.get(name);
      if (known !== undefined && known !== entry.mode) {
        throw new RecoveryError(
          `cannot redistribute operator state '${name}': old subtask ${subtaskIndex} stored it with mode '${entry.mode}', an earlier one with '${known}'`,
          { details: { stateName: name, subtaskIndex } },
        );
      }
      modes.set(name, entry.mode);
    }
  }
  const unchanged = oldSnapshots.length === newParallelism;
  for (const [name, mode] of modes) {
    const all = oldSnapshots.flatMap((snapshot) => snapshot[name]?.elements ?? []);
    for (let index = 0; index < newParallelism; index++) {
      let elements: Buffer[];
      if (mode === "union") elements = [...all];
      else if (unchanged) elements = [...(oldSnapshots[index]?.[name]?.elements ?? [])];
      else elements = all.slice(...evenRange(all.length, newParallelism, index));
      (result[index] as OperatorStateSnapshot)[name] = { mode, elements };
    }
  }
  return result;
}

/** The [start, end) run of `total` elements that subtask `index` of `parallelism` gets. */
function evenRange(total: number, parallelism: number, index: number): [number, number] {
  const base = Math.floor(total / parallelism);
  const extra = total % parallelism;
  const start = index * base + Math.min(index, extra);
  return [start, start + base + (index < extra ? 1 : 0)];
}
