import { CheckpointError } from "../errors/onceflow-error.js";
import type { AlignmentPhase } from "../runtime/exchange/checkpoint-alignment.js";
import type { StreamOperator } from "../runtime/operators/stream-operator.js";
import type { SubtaskExchange } from "../runtime/subtask.js";
import type { BatchChannelReceiver, BatchChannelSender } from "./batch-channel.js";

/**
 * One subtask thread's side of a `keyBy` exchange between worker threads: its channels to and from
 * every other subtask's thread, the barrier alignment of its keyed stage, and the end of input.
 *
 * Barriers travel in band. When the subtask's loop takes checkpoint N (a mail between batches, so
 * everything it emitted before is sent), it sends barrier N on every outgoing channel, then waits
 * until barrier N has arrived on every incoming channel; a channel that delivered it is held (its
 * later batches wait in the channel, whose sender waits for room) until the subtask has snapshotted.
 * Then the keyed stage holds exactly what every sender emitted before barrier N — Flink's aligned
 * checkpoint. A channel that delivered the end of input counts as aligned for every later barrier.
 * The stage behind the exchange ends once the subtask's own input and every incoming channel ended.
 */
export class ThreadExchange implements SubtaskExchange {
  private readonly barrierFrom = new Map<number, number>();
  private readonly endedFrom = new Set<number>();
  private aligning:
    | { checkpointId: number; resolve: () => void; reject: (error: unknown) => void }
    | undefined;
  /** Barriers up to this id are of checkpoints that are over: they no longer hold a channel. */
  private settledUpTo = 0;
  private headDone = false;
  private finishing: Promise<void> | undefined;
  private cancelled: unknown;
  private readonly endedListeners: Array<() => void> = [];
  readonly alignment: SubtaskExchange["alignment"];

  constructor(
    private readonly subtaskIndex: number,
    /** The channel to each other subtask, by subtask index. */
    private readonly senders: ReadonlyMap<number, BatchChannelSender>,
    /** The channel from each other subtask, by subtask index (set once they are created). */
    private readonly receivers: Map<number, BatchChannelReceiver>,
    /** This subtask's operators behind the exchange, in topological order. */
    private readonly behindExchange: readonly StreamOperator[],
    private readonly onError: (error: unknown) => void,
  ) {
    this.alignment = {
      arrive: (phase, checkpointId) => this.arrive(phase, checkpointId),
      abandon: (checkpointId) => this.settle(checkpointId),
      cancel: () => this.cancel(),
    };
  }

  /** The sender's subtask index of each incoming channel. */
  private get remoteSubtasks(): number[] {
    return [...this.receivers.keys()];
  }

  onEnded(listener: () => void): void {
    this.endedListeners.push(listener);
  }

  /** Handles one message of the channel from subtask `from` (see `BatchChannelReceiver`). */
  barrierArrived(from: number, checkpointId: number): void {
    if (checkpointId <= this.settledUpTo) return;
    this.barrierFrom.set(from, checkpointId);
    this.receivers.get(from)?.hold();
    this.checkAligned();
  }

  /** The channel from subtask `from` delivered the end of its input. */
  endArrived(from: number): void {
    this.endedFrom.add(from);
    this.checkAligned();
    this.checkEnded();
  }

  /** This subtask's operators before the exchange have finished: tell every receiving subtask. */
  async headEnded(): Promise<void> {
    for (const sender of this.senders.values()) await sender.send({ type: "end" });
    this.headDone = true;
    this.checkEnded();
  }

  /** A checkpoint is over (completed or aborted somewhere): its barriers hold no channel any more. */
  settle(checkpointId: number): void {
    this.settledUpTo = Math.max(this.settledUpTo, checkpointId);
    for (const [from, barrier] of [...this.barrierFrom]) {
      if (barrier > this.settledUpTo) continue;
      this.barrierFrom.delete(from);
      this.receivers.get(from)?.release();
    }
    if (this.aligning !== undefined && this.aligning.checkpointId <= this.settledUpTo) {
      const { checkpointId: id, reject } = this.aligning;
      this.aligning = undefined;
      reject(new CheckpointError("CHECKPOINT_FAILED", `checkpoint ${id} was given up`, { checkpointId: id }));
    }
  }

  private async arrive(phase: AlignmentPhase, checkpointId: number): Promise<void> {
    if (this.cancelled !== undefined) throw this.cancelled;
    if (phase === "snapshotted") {
      this.settle(checkpointId);
      return;
    }
    // Barriers of an earlier checkpoint that this subtask never took (it failed elsewhere) hold nothing.
    this.settle(checkpointId - 1);
    // Once the head ended, `end` went on every channel: no barrier follows it.
    if (!this.headDone) {
      for (const sender of this.senders.values()) await sender.send({ type: "barrier", checkpointId });
    }
    await new Promise<void>((resolve, reject) => {
      this.aligning = { checkpointId, resolve, reject };
      this.checkAligned();
    });
    // The stage may be finishing (every input ended): the snapshot comes after.
    await this.finishing;
  }

  private checkAligned(): void {
    const aligning = this.aligning;
    if (aligning === undefined) return;
    for (const from of this.remoteSubtasks) {
      if (this.endedFrom.has(from)) continue;
      if (this.barrierFrom.get(from) !== aligning.checkpointId) return;
    }
    this.aligning = undefined;
    aligning.resolve();
  }

  private checkEnded(): void {
    if (this.finishing !== undefined || !this.headDone) return;
    if (this.remoteSubtasks.some((from) => !this.endedFrom.has(from))) return;
    this.finishing = (async () => {
      for (const operator of this.behindExchange) await operator.gate!.run(() => operator.finish());
      for (const listener of this.endedListeners) listener();
    })();
    this.finishing.catch((error: unknown) => this.onError(error));
  }

  private cancel(): void {
    this.cancelled ??= new CheckpointError(
      "CHECKPOINT_FAILED",
      `subtask ${this.subtaskIndex}: the attempt ended during the checkpoint`,
    );
    const aligning = this.aligning;
    this.aligning = undefined;
    aligning?.reject(this.cancelled);
    for (const sender of this.senders.values()) sender.cancel();
  }
}
