import { serialize } from "node:v8";
import { MessageChannel, type MessagePort, type ResourceLimits, Worker } from "node:worker_threads";
import type { FunctionSnapshotContext } from "../api/checkpointed-function.js";
import { ErrorCode, OnceflowError } from "../errors/onceflow-error.js";
import type { AttemptSubtask, SubtaskCheckpointShare, SubtaskLiveness } from "../runtime/subtask.js";
import type { HostedAttempt, SubtaskHost } from "../runtime/subtask-host.js";
import { DEFAULT_CHANNEL_CAPACITY } from "./batch-channel.js";
import type { HostedCall, HostedCheckpointShare, HostedNotice, HostedReply } from "./hosted-messages.js";
import type { FromSubtaskThread, SubtaskThreadData } from "./thread-messages.js";

// A thread whose subtask closed but that a client's socket keeps alive is terminated after this long.
const EXIT_GRACE_MS = 2000;
const METRICS_TIMEOUT_MS = 5000;

/**
 * Starts the subtasks of a job coordinated by the main thread, one worker thread each, with a
 * bounded channel between every two of them for the `keyBy` exchange. Each attempt gets new
 * threads (a restart after a thread died starts them all again, from the latest checkpoint); the
 * first attempt's threads are started at once, so that their ids are known before the job runs.
 */
export class ThreadSubtaskHost implements SubtaskHost {
  private fresh: HostedThread[] | undefined;
  private current: HostedThread[] = [];

  constructor(
    private readonly script: URL,
    private readonly dataOf: (subtaskIndex: number) => SubtaskThreadData,
    private readonly resourceLimits: ResourceLimits,
    private readonly parallelism: number,
    private readonly capacity: number = DEFAULT_CHANNEL_CAPACITY,
  ) {
    this.fresh = this.spawn();
    this.current = this.fresh;
  }

  /** The thread ids of the running attempt's subtasks, by subtask index. */
  get threadIds(): number[] {
    return this.current.map((thread) => thread.threadId);
  }

  /** Every live thread's metrics registry as JSON (see `aggregateMetrics`). */
  metricsJson(): Promise<unknown[][]> {
    return Promise.all(this.current.map((thread) => thread.metricsJson()));
  }

  async start(attempt: HostedAttempt): Promise<AttemptSubtask[]> {
    const threads = this.fresh ?? this.spawn();
    this.fresh = undefined;
    this.current = threads;
    try {
      await Promise.all(threads.map((thread) => thread.ready));
      const to = threads.map(() => new Array<MessagePort | undefined>(this.parallelism));
      const from = threads.map(() => new Array<MessagePort | undefined>(this.parallelism));
      for (let sender = 0; sender < this.parallelism; sender++) {
        for (let receiver = 0; receiver < this.parallelism; receiver++) {
          if (sender === receiver) continue;
          const { port1, port2 } = new MessageChannel();
          to[sender]![receiver] = port1;
          from[receiver]![sender] = port2;
        }
      }
      const started = await Promise.allSettled(
        threads.map((thread, index) => {
          const restored = attempt.restoredOf(index);
          const ports = [...to[index]!, ...from[index]!].filter((port) => port !== undefined);
          return thread.call(
            {
              name: "start",
              attemptNumber: attempt.attemptNumber,
              incarnation: attempt.incarnation,
              restoredCheckpointId: attempt.restoredCheckpointId,
              restored: restored === undefined ? undefined : new Uint8Array(serialize(restored)),
              to: to[index]!,
              from: from[index]!,
              capacity: this.capacity,
            },
            ports,
          );
        }),
      );
      const failure = started.find((result) => result.status === "rejected");
      if (failure !== undefined) throw failure.reason;
    } catch (error) {
      // What did start closes (its transactions are aborted) before the threads end.
      await Promise.allSettled(threads.map((thread) => thread.closeAndEnd([], 0)));
      throw error;
    }
    return threads.map((thread) => new RemoteSubtask(thread));
  }

  /** Ends every thread at once (the process is going down). */
  terminate(): void {
    for (const thread of [...this.current, ...(this.fresh ?? [])]) thread.terminate();
  }

  private spawn(): HostedThread[] {
    return Array.from(
      { length: this.parallelism },
      (_, index) =>
        new HostedThread(this.script, { ...this.dataOf(index), hosted: true }, this.resourceLimits),
    );
  }
}

/** The main thread's end of one subtask thread: calls and their replies, and whether it lives. */
class HostedThread {
  readonly threadId: number;
  readonly index: number;
  readonly ready: Promise<void>;
  liveness: SubtaskLiveness;
  private readonly worker: Worker;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: unknown) => void }
  >();
  private readonly pendingMetrics = new Map<number, (json: unknown[]) => void>();
  private nextId = 0;
  private death: OnceflowError | undefined;
  private closed = false;

  constructor(script: URL, data: SubtaskThreadData, resourceLimits: ResourceLimits) {
    this.index = data.subtaskIndex;
    this.worker = new Worker(script, { workerData: data, resourceLimits });
    this.threadId = this.worker.threadId;
    this.liveness = { index: this.index, lastProgressAt: Date.now(), waiting: true, ended: false };
    const name = `subtask ${this.index} (thread ${this.threadId})`;
    let readyNow!: () => void;
    let notReady!: (error: unknown) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      readyNow = resolve;
      notReady = reject;
    });
    this.ready.catch(() => undefined);
    this.worker.on("message", (message: HostedReply | HostedNotice | FromSubtaskThread) => {
      switch (message.type) {
        case "ready":
          return readyNow();
        case "build-failed":
          return notReady(new OnceflowError(errorCodeOf(message.code), `${name}: ${message.message}`));
        case "liveness":
          this.liveness = message.liveness;
          return;
        case "metrics":
          this.pendingMetrics.get(message.id)?.(message.json);
          this.pendingMetrics.delete(message.id);
          return;
        case "reply": {
          const waiting = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (message.error === undefined) waiting?.resolve(message.value);
          else
            waiting?.reject(
              new OnceflowError(errorCodeOf(message.error.code), `${name}: ${message.error.message}`),
            );
          return;
        }
        default:
          return;
      }
    });
    const died = (reason: string): void => {
      if (this.death !== undefined) return;
      this.death = new OnceflowError("JOB_FAILED", `the thread of ${name} ${reason}`);
      this.liveness = { ...this.liveness, ended: true };
      notReady(this.death);
      for (const waiting of this.pending.values()) waiting.reject(this.death);
      this.pending.clear();
      for (const answer of this.pendingMetrics.values()) answer([]);
      this.pendingMetrics.clear();
    };
    this.worker.on("error", (error) => died(`died: ${error.message}`));
    this.worker.once("exit", (code) =>
      died(`exited with code ${code}${this.closed ? " after closing" : ""}`),
    );
  }

  call(call: HostedCall["call"], transfer: readonly MessagePort[] = []): Promise<unknown> {
    if (this.death !== undefined) return Promise.reject(this.death);
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: "call", id, call } satisfies HostedCall, [...transfer]);
    });
  }

  /** Ends the subtask's loop after the mail already queued; channel sends waiting for room fail. */
  terminateLoop(): void {
    if (this.death === undefined) this.worker.postMessage({ type: "terminate" });
  }

  /** Closes the subtask (see `Subtask.close`), then lets the thread end. Never rejects. */
  async closeAndEnd(failed: readonly number[], stored: number): Promise<unknown[]> {
    this.closed = true;
    let failures = 0;
    if (this.death === undefined) {
      failures = ((await this.call({ name: "close", failed, stored }).catch(() => 1)) as number) ?? 0;
    }
    setTimeout(() => void this.worker.terminate(), EXIT_GRACE_MS).unref();
    return Array.from(
      { length: failures },
      () => new Error("an operator failed to close (see the thread's log)"),
    );
  }

  terminate(): void {
    void this.worker.terminate();
  }

  metricsJson(): Promise<unknown[]> {
    if (this.death !== undefined) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise<unknown[]>((answer) => {
      const timer = setTimeout(() => {
        this.pendingMetrics.delete(id);
        answer([]);
      }, METRICS_TIMEOUT_MS);
      this.pendingMetrics.set(id, (json) => {
        clearTimeout(timer);
        answer(json);
      });
      this.worker.postMessage({ type: "metrics", id });
    });
  }
}

/** A subtask running in a worker thread, as the coordinating job's attempt sees it. */
class RemoteSubtask implements AttemptSubtask {
  readonly index: number;

  constructor(private readonly thread: HostedThread) {
    this.index = thread.index;
  }

  async run(): Promise<void> {
    await this.thread.call({ name: "run" });
  }

  whenInputEnded(): Promise<void> {
    // A thread that died never ends its input: its death fails the attempt through run().
    return this.thread.call({ name: "input-ended" }).then(
      () => undefined,
      () => new Promise<void>(() => {}),
    );
  }

  liveness(): SubtaskLiveness {
    return this.thread.liveness;
  }

  async triggerCheckpoint(
    checkpoint: FunctionSnapshotContext,
    parallelism: number,
  ): Promise<SubtaskCheckpointShare> {
    const { state, timings } = (await this.thread.call({
      name: "trigger",
      checkpointId: checkpoint.checkpointId,
      checkpointTimestamp: checkpoint.checkpointTimestamp,
      isFinal: checkpoint.isFinal === true,
      parallelism,
    })) as HostedCheckpointShare;
    return { state: Buffer.from(state.buffer, state.byteOffset, state.byteLength), timings };
  }

  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    await this.thread.call({ name: "complete", checkpointId });
  }

  async notifyCheckpointAborted(checkpointId: number): Promise<void> {
    await this.thread.call({ name: "aborted", checkpointId });
  }

  async stopReading(): Promise<void> {
    await this.thread.call({ name: "stop-reading" });
  }

  terminate(): void {
    this.thread.terminateLoop();
  }

  close(failedCheckpointIds: readonly number[] = [], storedCheckpointId = 0): Promise<unknown[]> {
    return this.thread.closeAndEnd(failedCheckpointIds, storedCheckpointId);
  }
}

const CODES = new Set<string>(Object.values(ErrorCode));
const errorCodeOf = (code: string): ErrorCode => (CODES.has(code) ? (code as ErrorCode) : "JOB_FAILED");
