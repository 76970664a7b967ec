import type { TypeSerializer } from "./serializer.js";

/**
 * Names a piece of state and how to serialize it. The name is the identity across restarts: keep it
 * stable.
 *
 * @example
 * ```ts
 * const countDescriptor: StateDescriptor<number> = { name: "count" };
 * ```
 */
export interface StateDescriptor<T> {
  readonly name: string;
  /** Defaults to {@link defaultSerializer}. */
  readonly serializer?: TypeSerializer<T>;
}

/**
 * One value per key (keyed state) — Flink's `ValueState`.
 *
 * @example
 * ```ts
 * const count = context.getState<number>({ name: "count" });
 * count.update((count.value() ?? 0) + 1);
 * ```
 */
export interface ValueState<T> {
  /** The value for the current key, or `undefined` when none was set. */
  value(): T | undefined;
  update(value: T): void;
  clear(): void;
}

/**
 * A list of values: per key (keyed state) or per subtask (operator state) — Flink's `ListState`.
 *
 * @example
 * ```ts
 * const seen = context.getListState<string>({ name: "seen" });
 * seen.add("a");
 * seen.get(); // ["a"]
 * ```
 */
export interface ListState<T> {
  /** A copy of the current elements. */
  get(): T[];
  add(value: T): void;
  addAll(values: readonly T[]): void;
  /** Replaces all elements. */
  update(values: readonly T[]): void;
  clear(): void;
}

/**
 * A map per key (keyed state) — Flink's `MapState`.
 *
 * @example
 * ```ts
 * const totals = context.getMapState<string, number>({ name: "totals" });
 * totals.put("eur", (totals.get("eur") ?? 0) + 5);
 * ```
 */
export interface MapState<K, V> {
  get(key: K): V | undefined;
  put(key: K, value: V): void;
  contains(key: K): boolean;
  remove(key: K): void;
  entries(): Array<[K, V]>;
  keys(): K[];
  values(): V[];
  isEmpty(): boolean;
  clear(): void;
}

/**
 * Operator state of one function instance, from `context.getOperatorStateStore()` in
 * `initializeState`.
 *
 * - `getListState`: on rescale, the elements of all subtasks are split evenly among the new ones.
 * - `getUnionListState`: on restore, every subtask gets all elements of all subtasks.
 *
 * @example
 * ```ts
 * initializeState(context) {
 *   this.buffered = context.getOperatorStateStore().getListState<Order>({ name: "buffered" });
 * }
 * ```
 */
export interface OperatorStateStore {
  getListState<T>(descriptor: StateDescriptor<T>): ListState<T>;
  getUnionListState<T>(descriptor: StateDescriptor<T>): ListState<T>;
}

/**
 * Keyed state access, available to functions after `keyBy`. State is scoped to the key of the
 * record being processed (and stored with the split that record came from).
 *
 * @example
 * ```ts
 * open(context: KeyedRuntimeContext) { this.count = context.getState<number>({ name: "count" }); }
 * ```
 */
export interface KeyedStateStore {
  getState<T>(descriptor: StateDescriptor<T>): ValueState<T>;
  getListState<T>(descriptor: StateDescriptor<T>): ListState<T>;
  getMapState<K, V>(descriptor: StateDescriptor<Map<K, V>>): MapState<K, V>;
}
