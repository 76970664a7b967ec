import { ConfigurationError } from "@onceflow/core";

type Slot =
  | { readonly state: "free" }
  | { readonly state: "in-use" }
  /** Committed, but a restore of a checkpoint up to `holdUntil - 1` would commit it again. */
  | { readonly state: "committed"; readonly holdUntil: number };

/**
 * What a pooled transactional id names: the subtask, the incarnation (the attempt) that owns it, and
 * the slot. Ids written before incarnations existed (`prefix-subtask-slot`) parse with
 * `incarnation: undefined`.
 *
 * @example
 * ```ts
 * const parts: TransactionalIdParts = { subtaskIndex: 0, incarnation: 7, slot: 2 }; // "orders-out-0-7-2"
 * ```
 */
export interface TransactionalIdParts {
  readonly subtaskIndex: number;
  readonly incarnation: number | undefined;
  readonly slot: number;
}

/**
 * The transactional ids of one subtask in one incarnation: `prefix-subtask-incarnation-slot` for a
 * fixed number of slots, so an attempt uses a bounded set of ids (never one new id per checkpoint)
 * and no two attempts ever share an id: an older (zombie) attempt cannot InitProducerId, abort or
 * commit a newer attempt's transactions, and an attempt's leftovers can be found by id.
 *
 * A slot is reused only when nothing can need its previous transaction again. Starting a
 * transaction on an id bumps its epoch (InitProducerId), after which the previous transaction can
 * no longer be committed with its stored epoch. So a slot stays held while its transaction is open
 * or pending, and after the commit until a checkpoint taken after that commit has completed (until
 * then a restore would re-commit it from the older checkpoint).
 *
 * @example
 * ```ts
 * const pool = new TransactionalIdPool("orders-out", 0, 7, 5);
 * const slot = pool.acquire();
 * pool.idOf(slot); // "orders-out-0-7-0"
 * ```
 */
export class TransactionalIdPool {
  private readonly slots: Slot[];

  constructor(
    private readonly prefix: string,
    private readonly subtaskIndex: number,
    private readonly incarnation: number,
    readonly size: number,
  ) {
    this.slots = Array.from({ length: size }, () => ({ state: "free" }) as const);
  }

  /** The id of `slot` of `subtask` in `incarnation` under `prefix`: `prefix-subtask-incarnation-slot`. */
  static idOf(prefix: string, subtask: number, incarnation: number, slot: number): string {
    return `${prefix}-${subtask}-${incarnation}-${slot}`;
  }

  /**
   * Reads subtask, incarnation and slot back from an id of `prefix` (also the older
   * `prefix-subtask-slot` form); `undefined` when the id is not one of this prefix's pooled ids — a
   * longer prefix that merely starts with this one, for example.
   */
  static parse(prefix: string, transactionalId: string): TransactionalIdParts | undefined {
    if (!transactionalId.startsWith(`${prefix}-`)) return undefined;
    const rest = transactionalId.slice(prefix.length + 1).split("-");
    if (!rest.every((part) => /^(0|[1-9]\d*)$/.test(part))) return undefined;
    const numbers = rest.map(Number);
    if (numbers.length === 3) {
      const [subtaskIndex, incarnation, slot] = numbers as [number, number, number];
      return { subtaskIndex, incarnation, slot };
    }
    if (numbers.length === 2) {
      const [subtaskIndex, slot] = numbers as [number, number];
      return { subtaskIndex, incarnation: undefined, slot };
    }
    return undefined;
  }

  idOf(slot: number): string {
    return TransactionalIdPool.idOf(this.prefix, this.subtaskIndex, this.incarnation, slot);
  }

  /** The slot of `transactionalId` when it is one of this pool's ids, else `undefined`. */
  slotOf(transactionalId: string): number | undefined {
    const parts = TransactionalIdPool.parse(this.prefix, transactionalId);
    if (
      parts === undefined ||
      parts.subtaskIndex !== this.subtaskIndex ||
      parts.incarnation !== this.incarnation ||
      parts.slot >= this.size
    ) {
      return undefined;
    }
    return parts.slot;
  }

  /** Takes the lowest free slot. */
  acquire(): number {
    const slot = this.slots.findIndex((s) => s.state === "free");
    if (slot < 0) {
      const held = this.slots.map((s, i) => `${i}: ${s.state}`).join(", ");
      throw new ConfigurationError(
        "transactionalIdPoolSize",
        `all ${this.size} transactional ids of subtask ${this.subtaskIndex} hold transactions that a restore may still need (${held}). This happens when checkpoints complete slower than they are taken: raise transactionalIdPoolSize`,
      );
    }
    this.slots[slot] = { state: "in-use" };
    return slot;
  }

  /** The slot's transaction is committed; hold it until a checkpoint above `lastSnapshotted` completes. */
  committed(slot: number, lastSnapshotted: number): void {
    if (slot >= 0 && slot < this.size)
      this.slots[slot] = { state: "committed", holdUntil: lastSnapshotted + 1 };
  }

  /** The slot's transaction will never be needed again (aborted, empty, or lost to its timeout). */
  release(slot: number): void {
    if (slot >= 0 && slot < this.size) this.slots[slot] = { state: "free" };
  }

  /** Checkpoint `checkpointId` completed: committed slots held for it are free again. */
  checkpointCompleted(checkpointId: number): void {
    this.slots.forEach((s, i) => {
      if (s.state === "committed" && s.holdUntil <= checkpointId) this.slots[i] = { state: "free" };
    });
  }
}
