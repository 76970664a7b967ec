import { ConfigurationError } from "@onceflow/core";

type Slot =
  | { readonly state: "free" }
  | { readonly state: "in-use" }
  /** Committed, but a restore of a checkpoint up to `holdUntil - 1` would commit it again. */
  | { readonly state: "committed"; readonly holdUntil: number };

/**
 * The transactional ids of one subtask: `prefix-subtask-slot` for a fixed number of slots, so a
 * job uses a bounded set of ids forever (never one new id per checkpoint).
 *
 * A slot is reused only when nothing can need its previous transaction again. Starting a
 * transaction on an id bumps its epoch (InitProducerId), after which the previous transaction can
 * no longer be committed with its stored epoch. So a slot stays held while its transaction is open
 * or pending, and after the commit until a checkpoint taken after that commit has completed (until
 * then a restore would re-commit it from the older checkpoint).
 */
export class TransactionalIdPool {
  private readonly slots: Slot[];

  constructor(
    private readonly prefix: string,
    private readonly subtaskIndex: number,
    readonly size: number,
  ) {
    this.slots = Array.from({ length: size }, () => ({ state: "free" }) as const);
  }

  /** The id of `slot` of `subtask` under `prefix`. */
  static idOf(prefix: string, subtask: number, slot: number): string {
    return `${prefix}-${subtask}-${slot}`;
  }

  idOf(slot: number): string {
    return TransactionalIdPool.idOf(this.prefix, this.subtaskIndex, slot);
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

  /** The slot's transaction will never be needed again (aborted, or empty). */
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
