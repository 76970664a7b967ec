import { serialize } from "node:v8";
import type { FunctionSnapshotContext } from "../api/checkpointed-function.js";
import type { Logger } from "../observability/logger.js";
import type { AlignmentPhase } from "./exchange/checkpoint-alignment.js";
import { SinkOperator } from "./operators/sink-operator.js";
import type { SourceOperator } from "./operators/source-operator.js";
import type { OperatorSnapshot, StreamOperator } from "./operators/stream-operator.js";
import type { SubtaskLoopMetrics } from "./subtask-loop-metrics.js";

/** What one subtask contributes to a checkpoint (stored serialized, one buffer per subtask). */
export interface SubtaskSnapshot {
  readonly formatVersion: 1;
  readonly checkpointId: number;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly operators: Record<string, OperatorSnapshot>;
}

/**
 * Where one subtask's share of a checkpoint spent its time, in milliseconds, each phase measured
 * where it happens; in order, they add up to the time from the trigger to the share being ready.
 */
export interface SubtaskCheckpointTimings {
  /** From the trigger until the loop took the barrier (it finishes the batch in hand first). */
  readonly barrierMs: number;
  /** Waiting for the other loops behind a `keyBy` exchange (0 without one). */
  readonly alignmentMs: number;
  /** Every operator's snapshot but the sinks', and the share's serialization. */
  readonly snapshotMs: number;
  /** The sinks' snapshots: where a two-phase-commit sink pre-commits its transaction. */
  readonly preCommitMs: number;
}

/** One subtask's share of a checkpoint: its state, serialized, and where its time went. */
export interface SubtaskCheckpointShare {
  readonly state: Buffer;
  readonly timings: SubtaskCheckpointTimings;
}

type Mail = () => Promise<void>;

/**
 * What a subtask loop needs of the `keyBy` exchange connecting it to the job's other subtasks: the
 * checkpoint alignment, and the end of input of the operators behind the exchange. Met by the
 * exchange inside one event loop (`LocalExchange`) and by the one between worker threads.
 */
export interface SubtaskExchange {
  readonly alignment: {
    /** Resolves once the subtask may go past `phase` of the checkpoint (see `CheckpointAlignment`). */
    arrive(phase: AlignmentPhase, checkpointId: number): Promise<void>;
    /** This subtask failed to take the checkpoint. */
    abandon(checkpointId: number, error: unknown): void;
    /** The attempt ends: nothing waits for this subtask's barriers any more. */
    cancel(): void;
  };
  /** Calls `listener` once everything behind the exchange has finished. */
  onEnded(listener: () => void): void;
  /** This subtask's operators before the exchange have finished. */
  headEnded(): Promise<void>;
}

/**
 * What a job's attempt and its checkpoint coordinator ask of a subtask: met by {@link Subtask},
 * which runs in this event loop, and by the stand-in of a subtask that runs in a worker thread.
 */
export interface AttemptSubtask {
  readonly index: number;
  run(): Promise<void>;
  whenInputEnded(): Promise<void>;
  liveness(): SubtaskLiveness;
  triggerCheckpoint(
    checkpoint: FunctionSnapshotContext,
    parallelism: number,
  ): Promise<SubtaskCheckpointShare>;
  notifyCheckpointComplete(checkpointId: number): Promise<void>;
  notifyCheckpointAborted(checkpointId: number): Promise<void>;
  stopReading(): Promise<void>;
  terminate(): void;
  close(failedCheckpointIds?: readonly number[], storedCheckpointId?: number): Promise<unknown[]>;
}

/**
 * Whether a subtask's loop is alive: when it last began a step or woke up, and whether it is
 * waiting now (for input, mail or a timer) rather than busy in a step. Reported as
 * `JobStatus.subtasks` (type `SubtaskStatus`).
 *
 * @example
 * ```ts
 * const stuck = (s: SubtaskLiveness) => !s.waiting && !s.ended && Date.now() - s.lastProgressAt > 60_000;
 * ```
 */
export interface SubtaskLiveness {
  readonly index: number;
  /** When the loop last began a step or woke up (ms since the epoch). */
  readonly lastProgressAt: number;
  /** True while the loop waits with nothing to do: alive however long it waits. */
  readonly waiting: boolean;
  /** True once the loop has ended (the attempt is shutting down). */
  readonly ended: boolean;
}

// Yield to the event loop at least this often, so timers and I/O (checkpoint triggers) get a turn.
const YIELD_INTERVAL_MS = 5;
const CLOSE_TIMEOUT_MS = 10_000;

/**
 * One copy of the operator chain, run by a single loop — Flink's mailbox model. Records, timers,
 * checkpoint barriers and notifications are all handled by this loop one at a time, so no
 * operator is ever called concurrently and a checkpoint always sees state between batches.
 */
export class Subtask implements AttemptSubtask {
  private readonly mailbox: Mail[] = [];
  private wakeUp: (() => void) | undefined;
  private terminated = false;
  private inputEnded = false;
  private readonly endOfInput: Promise<void>;
  private resolveEndOfInput!: () => void;
  /** Checkpoints whose abort every operator has been told of. */
  private readonly abortedDelivered = new Set<number>();
  /** The highest checkpoint whose completion every operator has been told of. */
  private completeDelivered = 0;
  private lastProgressAt = Date.now();
  private waiting = false;
  private loopEnded = false;
  /** Set by the job: where the loop's time goes. */
  loopMetrics: SubtaskLoopMetrics | undefined;

  constructor(
    readonly index: number,
    /** Operators in topological order: sources first, sinks last. */
    private readonly operators: readonly StreamOperator[],
    private readonly sources: readonly SourceOperator[],
    private readonly logger: Logger,
    /** Shared with the process's other subtasks when a `keyBy` exchange connects them. */
    private readonly exchange?: SubtaskExchange,
  ) {
    this.endOfInput = new Promise((resolve) => {
      this.resolveEndOfInput = resolve;
    });
    exchange?.onEnded(() => this.resolveEndOfInput());
  }

  /** Wakes the loop if it waits: another subtask's loop handed work to one of its operators. */
  workArrived(): void {
    this.wake();
  }

  /** Whether the loop is alive (for the job's status and health checks). */
  liveness(): SubtaskLiveness {
    return {
      index: this.index,
      lastProgressAt: this.lastProgressAt,
      waiting: this.waiting,
      ended: this.loopEnded,
    };
  }

  /** Resolves once every source has finished and every operator's `finish` has run. */
  whenInputEnded(): Promise<void> {
    return this.endOfInput;
  }

  /** Runs `action` in the loop, between batches; resolves with its result. */
  enqueue<T>(action: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.mailbox.push(async () => {
        try {
          resolve(await action());
        } catch (error) {
          reject(error);
          throw error;
        }
      });
      this.wake();
    });
  }

  /** Takes this subtask's share of checkpoint `checkpointId`, serialized, with its timings. */
  triggerCheckpoint(
    checkpoint: FunctionSnapshotContext,
    parallelism: number,
  ): Promise<SubtaskCheckpointShare> {
    const { checkpointId } = checkpoint;
    const triggered = performance.now();
    return this.enqueue(async () => {
      const barrierTaken = performance.now();
      const alignment = this.exchange?.alignment;
      const operators: Record<string, OperatorSnapshot> = {};
      let alignmentMs = 0;
      let preCommitMs = 0;
      try {
        // Behind an exchange, every sending loop must have taken the barrier first (see
        // CheckpointAlignment); its channels stay held until every stage has snapshotted.
        if (alignment) alignmentMs += await timed(() => alignment.arrive("aligned", checkpointId));
        for (const operator of this.operators) {
          const started = performance.now();
          const snapshot = await operator.snapshot(checkpoint);
          if (operator instanceof SinkOperator) preCommitMs += performance.now() - started;
          if (snapshot) operators[operator.uid] = snapshot;
        }
        if (alignment) alignmentMs += await timed(() => alignment.arrive("snapshotted", checkpointId));
      } catch (error) {
        alignment?.abandon(checkpointId, error);
        throw error;
      }
      const snapshot: SubtaskSnapshot = {
        formatVersion: 1,
        checkpointId,
        subtaskIndex: this.index,
        parallelism,
        operators,
      };
      const state = serialize(snapshot);
      const ready = performance.now();
      return {
        state,
        timings: {
          barrierMs: barrierTaken - triggered,
          alignmentMs,
          snapshotMs: Math.max(0, ready - barrierTaken - alignmentMs - preCommitMs),
          preCommitMs,
        },
      };
    });
  }

  notifyCheckpointComplete(checkpointId: number): Promise<void> {
    return this.enqueue(() => this.deliverComplete(checkpointId));
  }

  private async deliverComplete(checkpointId: number): Promise<void> {
    if (checkpointId <= this.completeDelivered) return;
    this.completeDelivered = checkpointId;
    for (const operator of this.operators)
      await inStage(operator, () => operator.notifyCheckpointComplete(checkpointId));
  }

  notifyCheckpointAborted(checkpointId: number): Promise<void> {
    return this.enqueue(() => this.deliverAborted(checkpointId));
  }

  /** Stops reading input (stop-with-checkpoint); the loop keeps serving mail. */
  stopReading(): Promise<void> {
    return this.enqueue(async () => {
      for (const source of this.sources) source.stopped = true;
    });
  }

  /** Ends the loop after the mail already queued. */
  terminate(): void {
    this.terminated = true;
    this.exchange?.alignment.cancel();
    this.wake();
  }

  async initialize(): Promise<void> {
    for (const operator of this.operators) await operator.open();
  }

  private async deliverAborted(checkpointId: number): Promise<void> {
    if (this.abortedDelivered.has(checkpointId)) return;
    this.abortedDelivered.add(checkpointId);
    for (const operator of this.operators)
      await inStage(operator, () => operator.notifyCheckpointAborted(checkpointId));
  }

  /**
   * Closes every operator; never throws, so that every one is closed. A close that hangs (a
   * connection that died mid-request) is given up after a while: it must not block the restart.
   * `failedCheckpointIds` are the attempt's checkpoints that can never be restored: operators that
   * were not told yet (the loop ended first) are told now, before they close, so that sinks can
   * give up what only those checkpoints carried. `storedCheckpointId`, the attempt's last stored
   * checkpoint, is reported complete to operators that were not told yet, so that sinks commit it
   * now rather than hold it (and its locks) until a restart — or forever, when the job failed for
   * good.
   */
  async close(failedCheckpointIds: readonly number[] = [], storedCheckpointId = 0): Promise<unknown[]> {
    const failures: unknown[] = [];
    // The loop has ended: nothing else calls the operators now.
    for (const checkpointId of failedCheckpointIds) {
      await this.deliverAborted(checkpointId).catch((error: unknown) => failures.push(error));
    }
    if (storedCheckpointId > this.completeDelivered) {
      await this.withinCloseTimeout(this.deliverComplete(storedCheckpointId)).catch((error: unknown) => {
        failures.push(error);
        this.logger.warn(
          { checkpointId: storedCheckpointId, err: error },
          "committing the last stored checkpoint on close failed; a restart commits it",
        );
      });
    }
    for (const operator of this.operators) {
      try {
        await this.withinCloseTimeout(operator.close());
      } catch (error) {
        failures.push(error);
        this.logger.warn({ operator: operator.uid, err: error }, "operator failed to close");
      }
    }
    this.loopMetrics?.close();
    return failures;
  }

  private async withinCloseTimeout(work: Promise<void> | void): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        work,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`did not finish within ${CLOSE_TIMEOUT_MS} ms on close; given up`)),
            CLOSE_TIMEOUT_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The loop. Rejects with the first failure of any operator. */
  async run(): Promise<void> {
    try {
      await this.loop();
    } catch (error) {
      // This loop takes no barrier any more: the other loops must not wait for it in a checkpoint.
      this.exchange?.alignment.cancel();
      throw error;
    } finally {
      this.loopEnded = true;
      this.loopMetrics?.close();
    }
  }

  private async loop(): Promise<void> {
    let lastYield = Date.now();
    while (!this.terminated || this.mailbox.length > 0) {
      this.lastProgressAt = Date.now();
      const mail = this.mailbox.shift();
      if (mail) {
        await mail();
        continue;
      }
      if (this.terminated) break;
      const now = Date.now();
      await this.fireProcessingTimers(now);
      let progressed = false;
      for (const source of this.sources) {
        if (await source.pollOnce(now)) progressed = true;
      }
      if (!this.inputEnded && this.sources.every((source) => source.finished)) await this.endInput();
      if (progressed) {
        if (now - lastYield >= YIELD_INTERVAL_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          lastYield = Date.now();
        }
        continue;
      }
      await this.idle(now);
      lastYield = Date.now();
    }
  }

  private async endInput(): Promise<void> {
    this.inputEnded = true;
    const exchange = this.exchange;
    if (exchange === undefined) {
      for (const operator of this.operators) await operator.finish();
      this.resolveEndOfInput();
      return;
    }
    // Operators behind the exchange end when every sending subtask has ended (LocalExchange).
    for (const operator of this.operators) if (operator.gate === undefined) await operator.finish();
    await exchange.headEnded();
  }

  private async fireProcessingTimers(now: number): Promise<void> {
    for (const operator of this.operators) {
      const next = operator.nextProcessingTime();
      if (next !== undefined && next <= now)
        await inStage(operator, () => operator.fireProcessingTimers(now));
    }
  }

  // Sleep until mail arrives, a reader has data, a timer is due or discovery is due.
  private async idle(now: number): Promise<void> {
    // Mail that arrived while this loop was busy must not wait for the next wake-up.
    if (this.mailbox.length > 0 || this.terminated) return;
    let wakeAt = Infinity;
    for (const operator of this.operators)
      wakeAt = Math.min(wakeAt, operator.nextProcessingTime() ?? Infinity);
    const reading = this.sources.filter((source) => !source.finished && !source.stopped);
    for (const source of reading) wakeAt = Math.min(wakeAt, source.nextDiscoveryTime() ?? Infinity);
    // Idleness and discovery need the loop to look again now and then even without data.
    if (reading.length > 0) wakeAt = Math.min(wakeAt, now + 200);
    let timer: NodeJS.Timeout | undefined;
    const waits: Promise<void>[] = [
      new Promise<void>((resolve) => {
        this.wakeUp = resolve;
      }),
      ...reading.map((source) => source.isAvailable()),
    ];
    if (Number.isFinite(wakeAt)) {
      waits.push(
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.max(0, wakeAt - now));
        }),
      );
    }
    this.waiting = true;
    const waitStarted = performance.now();
    try {
      await Promise.race(waits);
    } finally {
      this.waiting = false;
      this.lastProgressAt = Date.now();
      this.loopMetrics?.waitedIdle(performance.now() - waitStarted);
    }
    if (timer) clearTimeout(timer);
    this.wakeUp = undefined;
  }

  private wake(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }
}

async function timed(action: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

/** Calls an operator from this subtask's own loop, through its stage's gate when it has one. */
function inStage(operator: StreamOperator, action: () => void | Promise<void>): void | Promise<void> {
  const gate = operator.gate;
  return gate ? gate.run(action) : action();
}
