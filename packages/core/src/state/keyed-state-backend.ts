import { ConfigurationError } from "../errors/onceflow-error.js";
import { defaultSerializer, type TypeSerializer } from "./serializer.js";
import type { KeyedStateStore, ListState, MapState, StateDescriptor, ValueState } from "./state.js";

/** A key after `keyBy`: primitives only, so that keys compare by value and survive serialization. */
export type StateKey = string | number | bigint | boolean;

/**
 * Serialized keyed state of one scope (a key group, or a split for a stream reinterpreted as
 * keyed): state name → bytes of the whole key → value table.
 */
export type KeyedScopeSnapshot = Record<string, Buffer>;

type Table = Map<StateKey, unknown>;

/** The one scope of key-scoped state between snapshots (see `KeyedStateBackend`). */
export const KEY_SCOPED = "key-groups";

interface RegisteredState {
  readonly kind: "value" | "list" | "map";
  readonly serializer: TypeSerializer<unknown> | undefined;
}

/**
 * Keyed state of one operator in one subtask, by state name and key. In a checkpoint it is divided
 * into scopes, so that on rescale a scope moves to its new subtask whole: the key's key group (after
 * `keyBy`, given `scopeOfKey`), or the split a record came from (after `reinterpretAsKeyedStream`,
 * set per batch with `setCurrentScope`). Key groups are worked out only at snapshots: between them
 * each state is one table, so a record's state access costs no hashing. Access is synchronous: the
 * tables are in memory and snapshotted at each checkpoint.
 */
export class KeyedStateBackend implements KeyedStateStore {
  private readonly scopes = new Map<string, Map<string, Table>>();
  private readonly restored = new Map<string, KeyedScopeSnapshot>();
  private readonly registered = new Map<string, RegisteredState>();
  private currentTables: Map<string, Table> | undefined;
  currentScope = "";
  currentKey: StateKey = "";

  constructor(
    restored: Readonly<Record<string, KeyedScopeSnapshot>> = {},
    /** The scope of each key (its key group's) when state is scoped by key, not per batch. */
    private readonly scopeOfKey?: (key: StateKey) => string,
  ) {
    for (const [scope, snapshot] of Object.entries(restored)) this.restored.set(scope, { ...snapshot });
    if (scopeOfKey) this.setCurrentScope(KEY_SCOPED);
  }

  /** Points state access at `scope` (a key group's or a split's). */
  setCurrentScope(scope: string): void {
    if (this.currentScope === scope && this.currentTables) return;
    this.currentScope = scope;
    let tables = this.scopes.get(scope);
    if (!tables) {
      tables = new Map();
      this.scopes.set(scope, tables);
    }
    this.currentTables = tables;
  }

  setCurrentKey(key: StateKey): void {
    this.currentKey = key;
  }

  /** The current scope's table for a state, restoring it from the checkpoint on first use. */
  table(name: string): Table {
    const tables = this.currentTables;
    if (!tables) throw new Error("keyed state used outside of a keyed context");
    let table = tables.get(name);
    if (!table) {
      table =
        (this.scopeOfKey ? this.restoreFromEveryScope(name) : this.restoreTable(this.currentScope, name)) ??
        new Map();
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

  /** Serializes every scope's tables (restored tables never touched are carried over as they were). */
  snapshot(): Record<string, KeyedScopeSnapshot> {
    const result: Record<string, KeyedScopeSnapshot> = {};
    for (const [scope, snapshot] of this.restored) result[scope] = { ...snapshot };
    const scopeOfKey = this.scopeOfKey;
    if (scopeOfKey) {
      for (const [name, table] of this.scopes.get(KEY_SCOPED) ?? []) {
        const parts = new Map<string, Table>();
        for (const [key, value] of table) {
          const scope = scopeOfKey(key);
          let part = parts.get(scope);
          if (!part) {
            part = new Map();
            parts.set(scope, part);
          }
          part.set(key, value);
        }
        for (const [scope, part] of parts) {
          result[scope] ??= {};
          result[scope][name] = this.serializeTable(name, part);
        }
      }
      return result;
    }
    for (const [scope, tables] of this.scopes) {
      const out: KeyedScopeSnapshot = result[scope] ?? {};
      for (const [name, table] of tables) {
        if (table.size === 0) {
          delete out[name];
          continue;
        }
        out[name] = this.serializeTable(name, table);
      }
      if (Object.keys(out).length > 0) result[scope] = out;
      else delete result[scope];
    }
    return result;
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

  private restoreTable(scope: string, name: string): Table | undefined {
    const snapshot = this.restored.get(scope);
    const bytes = snapshot?.[name];
    if (!snapshot || !bytes) return undefined;
    delete snapshot[name];
    if (Object.keys(snapshot).length === 0) this.restored.delete(scope);
    return this.decodeTable(name, bytes);
  }

  // Key-scoped state: a state's table is the union of its restored key groups (their keys differ).
  private restoreFromEveryScope(name: string): Table | undefined {
    let merged: Table | undefined;
    for (const scope of [...this.restored.keys()]) {
      const table = this.restoreTable(scope, name);
      if (!table) continue;
      if (!merged) merged = table;
      else for (const [key, value] of table) merged.set(key, value);
    }
    return merged;
  }

  private decodeTable(name: string, bytes: Buffer): Table {
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
