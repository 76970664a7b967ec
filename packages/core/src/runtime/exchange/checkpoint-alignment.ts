import { CheckpointError } from "../../errors/onceflow-error.js";

/** The two points every subtask loop of the process meets at in a checkpoint. */
export type AlignmentPhase = "aligned" | "snapshotted";

interface Round {
  arrived: number;
  readonly waiters: Array<{ resolve: () => void; reject: (error: unknown) => void }>;
}

/**
 * Barrier alignment for an exchange inside one process. Barrier N is the checkpoint's mail: each
 * subtask loop takes it between batches, so once every loop has taken it (`aligned`) no batch is
 * in flight on any channel, and each stage behind the exchange has received everything its senders
 * emitted before the barrier and nothing after — the state Flink's aligned barriers reach. Every
 * loop then snapshots its operators, and stays held until all have (`snapshotted`): a channel that
 * delivered the barrier carries nothing more until its receiving stage has snapshotted.
 */
export class CheckpointAlignment {
  private readonly rounds = new Map<string, Round>();
  private readonly abandoned = new Map<number, unknown>();
  private cancelled: unknown;

  constructor(private readonly participants: number) {}

  /** Resolves once every participant has arrived at `phase` of `checkpointId`. */
  arrive(phase: AlignmentPhase, checkpointId: number): Promise<void> {
    if (this.cancelled !== undefined) return Promise.reject(this.cancelled);
    const failure = this.abandoned.get(checkpointId);
    if (failure !== undefined) return Promise.reject(failure);
    const name = `${checkpointId}:${phase}`;
    let round = this.rounds.get(name);
    if (!round) {
      round = { arrived: 0, waiters: [] };
      this.rounds.set(name, round);
    }
    round.arrived++;
    const arrived = new Promise<void>((resolve, reject) => round.waiters.push({ resolve, reject }));
    if (round.arrived === this.participants) {
      this.rounds.delete(name);
      for (const waiter of round.waiters) waiter.resolve();
    }
    return arrived;
  }

  /** A participant failed in `checkpointId`: the others stop waiting for it. */
  abandon(checkpointId: number, error: unknown): void {
    if (this.abandoned.has(checkpointId)) return;
    const failure = new CheckpointError(
      "CHECKPOINT_FAILED",
      `checkpoint ${checkpointId}: another subtask failed to take it: ${error instanceof Error ? error.message : String(error)}`,
      { checkpointId, cause: error },
    );
    this.abandoned.set(checkpointId, failure);
    for (const phase of ["aligned", "snapshotted"] as const)
      this.rejectRound(`${checkpointId}:${phase}`, failure);
  }

  /** The attempt ends: every loop still waiting is released (with a failure). */
  cancel(): void {
    this.cancelled ??= new CheckpointError("CHECKPOINT_FAILED", "the attempt ended during the checkpoint");
    for (const name of [...this.rounds.keys()]) this.rejectRound(name, this.cancelled);
  }

  private rejectRound(name: string, failure: unknown): void {
    const round = this.rounds.get(name);
    if (!round) return;
    this.rounds.delete(name);
    for (const waiter of round.waiters) waiter.reject(failure);
  }
}
