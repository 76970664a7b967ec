import { ConfigurationError } from "../errors/onceflow-error.js";
import { defaultSerializer, type TypeSerializer } from "./serializer.js";
import type { KeyedStateStore, ListState, MapState, StateDescriptor, ValueState } from "./state.js";

/** A key after `keyBy`: primitives only, so that keys compare by value and survive serialization. */
export type StateKey = string | number | bigint | boolean;

/** Serialized keyed state of one split: state name → bytes of the whole key → value table. */
export type KeyedSplitSnapshot = Record<string, Buffer>;

type Table = Map<StateKey, unknown>;

interface RegisteredState {
  readonly kind: "value" | "list" | "map";
  readonly serializer: TypeSerializer<unknown> | undefined;
}

/**
 * Keyed state of one operator in one subtask. State lives per split (the split a record came
 * from) and per key, so that on rescale a split moves to its new subtask with its keyed state.
 * Access is synchronous: the tables are in memory and snapshotted at each checkpoint.
 */
export class KeyedStateBackend implements KeyedStateStore {
  private readonly splits = new Map<string, Map<string, Table>>();
  private readonly restored = new Map<string, KeyedSplitSnapshot>();
  private readonly registered = new Map<string, RegisteredState>();
  private currentTables: Map<string, Table> | undefined;
  currentSplit = "";
  currentKey: StateKey = "";

  constructor(restored: Readonly<Record<string, KeyedSplitSnapshot>> = {}) {
    for (const [splitKey, snapshot] of Object.entries(restored)) this.restored.set(splitKey, snapshot);
  }

  /** Points state access at `splitKey` (once per batch). */
  setCurrentSplit(splitKey: string): void {
    if (this.currentSplit === splitKey && this.currentTables) return;
    this.currentSplit = splitKey;
    let tables = this.splits.get(splitKey);
    if (!tables) {
      tables = new Map();
      this.splits.set(splitKey, tables);
    }
    this.currentTables = tables;
  }

  setCurrentKey(key: StateKey): void {
    this.currentKey = key;
  }

  /** The current split's table for a state, restoring it from the checkpoint on first use. */
  table(name: string): Table {
    const tables = this.currentTables;
    if (!tables) throw new Error("keyed state used outside of a keyed context");
    let table = tables.get(name);
    if (!table) {
      table = this.restoreTable(this.currentSplit, name) ?? new Map();
      tables.set(name, table);
    }
    return table;
  }

  getState<T>(descriptor: StateDescriptor<T>): ValueState<T> {
    this.register(descriptor, "value");
    const name = descriptor.name;
    return {
      value: () => this.table(name).get(this.currentKey) as T | undefined,
      update: (value) => {
        this.table(name).set(this.currentKey, value);
      },
      clear: () => {
        this.table(name).delete(this.currentKey);
      },
    };
  }

  getListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
    this.register(descriptor, "list");
    const name = descriptor.name;
    const list = (): T[] | undefined => this.table(name).get(this.currentKey) as T[] | undefined;
    return {
      get: () => [...(list() ?? [])],
      add: (value) => {
        const current = list();
        if (current) current.push(value);
        else this.table(name).set(this.currentKey, [value]);
      },
      addAll: (values) => {
        const current = list();
        if (current) current.push(...values);
        else this.table(name).set(this.currentKey, [...values]);
      },
      update: (values) => {
        this.table(name).set(this.currentKey, [...values]);
      },
      clear: () => {
        this.table(name).delete(this.currentKey);
      },
    };
  }

  getMapState<K, V>(descriptor: StateDescriptor<Map<K, V>>): MapState<K, V> {
    this.register(descriptor, "map");
    const name = descriptor.name;
    const map = (): Map<K, V> | undefined => this.table(name).get(this.currentKey) as Map<K, V> | undefined;
    const mapForWrite = (): Map<K, V> => {
      let current = map();
      if (!current) {
        current = new Map();
        this.table(name).set(this.currentKey, current);
      }
      return current;
    };
    return {
      get: (key) => map()?.get(key),
      put: (key, value) => {
        mapForWrite().set(key, value);
      },
      contains: (key) => map()?.has(key) ?? false,
      remove: (key) => {
        const current = map();
        if (!current) return;
        current.delete(key);
        if (current.size === 0) this.table(name).delete(this.currentKey);
      },
      entries: () => [...(map()?.entries() ?? [])],
      keys: () => [...(map()?.keys() ?? [])],
      values: () => [...(map()?.values() ?? [])],
      isEmpty: () => (map()?.size ?? 0) === 0,
      clear: () => {
        this.table(name).delete(this.currentKey);
      },
    };
  }

  /** Serializes every split's tables (restored tables never touched are carried over as they were). */
  snapshot(): Record<string, KeyedSplitSnapshot> {
    const result: Record<string, KeyedSplitSnapshot> = {};
    for (const [splitKey, snapshot] of this.restored) result[splitKey] = { ...snapshot };
    for (const [splitKey, tables] of this.splits) {
      const out: KeyedSplitSnapshot = result[splitKey] ?? {};
      for (const [name, table] of tables) {
        if (table.size === 0) {
          delete out[name];
          continue;
        }
        out[name] = this.serializeTable(name, table);
      }
      result[splitKey] = out;
    }
    return result;
  }

  /** The split keys that hold state, for checkpoint summaries. */
  splitKeys(): string[] {
    return [...new Set([...this.restored.keys(), ...this.splits.keys()])];
  }

  private register(descriptor: StateDescriptor<unknown>, kind: RegisteredState["kind"]): void {
    const existing = this.registered.get(descriptor.name);
    if (existing && existing.kind !== kind) {
      throw new ConfigurationError(
        `state '${descriptor.name}'`,
        `registered as ${existing.kind} state and again as ${kind} state; use a different name for each`,
      );
    }
    this.registered.set(descriptor.name, {
      kind,
      serializer: descriptor.serializer as TypeSerializer<unknown>,
    });
  }

  private serializeTable(name: string, table: Table): Buffer {
    const serializer = this.registered.get(name)?.serializer;
    if (!serializer) return defaultSerializer.serialize(table);
    // A custom serializer handles values; keys are primitives and go through the default format.
    const entries: Array<[StateKey, Buffer]> = [];
    for (const [key, value] of table) entries.push([key, serializer.serialize(value)]);
    return defaultSerializer.serialize({ customSerializer: true, entries });
  }

  private restoreTable(splitKey: string, name: string): Table | undefined {
    const snapshot = this.restored.get(splitKey);
    const bytes = snapshot?.[name];
    if (!snapshot || !bytes) return undefined;
    delete snapshot[name];
    if (Object.keys(snapshot).length === 0) this.restored.delete(splitKey);
    const decoded = defaultSerializer.deserialize(bytes);
    if (decoded instanceof Map) return decoded as Table;
    const serializer = this.registered.get(name)?.serializer;
    if (!serializer) {
      throw new ConfigurationError(
        `state '${name}'`,
        "was written with a custom serializer; register the state with that serializer again",
      );
    }
    const table: Table = new Map();
    for (const [key, value] of (decoded as { entries: Array<[StateKey, Buffer]> }).entries) {
      table.set(key, serializer.deserialize(Buffer.from(value)));
    }
    return table;
  }
}
