import { type CheckpointStorage, Job, type JobResult, type RestoreSetting } from "../../src/index.js";
import { type ControlledInput, ControlledSource } from "./controlled-source.js";
import { GatedStorage, type StorageObserver } from "./gated-storage.js";
import { keyedResults, positionInSplit } from "./keyed-job.js";
import { ProcessGate } from "./process-gate.js";
import type { SinkHost, SinkUnderTest } from "./sink-under-test.js";

/** Checkpoint timing of every explored process (real milliseconds). */
export const CHECKPOINT_TIMEOUT_MS = 100;
/** Between periodic checkpoints, when the job cannot take one on demand. */
export const PERIODIC_INTERVAL_MS = 20;

/** How to start one explored process. */
export interface ExploredProcessOptions {
  readonly name: string;
  readonly jobId: string;
  readonly parallelism: number;
  /** The subtask this process runs; undefined: it runs all of them. */
  readonly subtaskIndex: number | undefined;
  readonly storage: CheckpointStorage;
  readonly input: ControlledInput;
  readonly target: SinkUnderTest;
  readonly restore: RestoreSetting;
  readonly tolerableFailures: number;
  /** The keyed job (see `keyed-job.ts`) instead of the input passed through to the sink. */
  readonly keyed?: boolean;
  /** The run it belongs to (see {@link SinkHost.generation}). */
  readonly generation?: number;
  /** Told of the claims and landed stores of this process. */
  readonly storageObserver?: StorageObserver;
  /** Told when one of its sinks closed: an attempt ended (never for a killed process). */
  readonly onAttemptEnded?: (process: ExploredProcess, transactionIds: readonly string[]) => void;
}

/** The job of the lead's design that takes checkpoints on demand, when it has it. */
interface TriggerableJob {
  triggerCheckpoint?(): Promise<number>;
}

/**
 * One process of an explored deployment: a real {@link Job} whose storage, source and sink go
 * through one {@link ProcessGate}. Killing it freezes it forever (nothing it does has effect any
 * more); a restart is a new `ExploredProcess` on the same storage and external system.
 *
 * @example
 * ```ts
 * const process = new ExploredProcess({ name: "p1", jobId: "explore", parallelism: 2, subtaskIndex: 0, … });
 * process.start();
 * process.gate.kill();
 * ```
 */
export class ExploredProcess {
  readonly gate: ProcessGate;
  readonly storage: GatedStorage;
  readonly job: Job;
  private readonly source: ControlledSource;
  private outcome: { result?: JobResult; error?: unknown } | undefined;
  private running: Promise<void> | undefined;

  constructor(readonly options: ExploredProcessOptions) {
    this.gate = new ProcessGate(options.name);
    this.storage = new GatedStorage(options.storage, this.gate, options.storageObserver);
    this.source = new ControlledSource(options.input, this.gate);
    const onDemand = typeof (Job.prototype as TriggerableJob).triggerCheckpoint === "function";
    this.job = new Job({
      jobId: options.jobId,
      parallelism: options.parallelism,
      ...(options.subtaskIndex === undefined ? {} : { subtaskIndex: options.subtaskIndex }),
      checkpointing: {
        interval: onDemand ? 600_000 : PERIODIC_INTERVAL_MS,
        // On demand: no checkpoint but the model's (the default first one comes after 200 ms).
        initialDelay: onDemand ? 600_000 : PERIODIC_INTERVAL_MS,
        timeout: CHECKPOINT_TIMEOUT_MS,
        retained: 3,
        tolerableFailures: options.tolerableFailures,
        storage: this.storage,
      },
      restartStrategy: { type: "fixed-delay", attempts: 25, delay: 5 },
      restore: options.restore,
    });
    const host: SinkHost = {
      name: options.name,
      gate: this.gate,
      generation: options.generation ?? 0,
      attemptEnded: (transactionIds) => options.onAttemptEnded?.(this, transactionIds),
    };
    const input = options.keyed
      ? this.job.fromSource(this.source, {
          uid: "input",
          watermarks: { timestampAssigner: positionInSplit(options.input.perSplit), maxOutOfOrderness: 0 },
        })
      : this.job.fromSource(this.source, { uid: "input" });
    (options.keyed ? keyedResults(input, options.input) : input).sinkTo(
      () => options.target.createSink(host),
      {
        uid: "output",
      },
    );
  }

  get name(): string {
    return this.options.name;
  }

  get host(): SinkHost {
    return { name: this.options.name, gate: this.gate, generation: this.options.generation ?? 0 };
  }

  /** Starts `execute()`; its end is kept in {@link ExploredProcess.ended}. */
  start(): void {
    this.running = this.job.execute().then(
      (result) => {
        this.outcome = { result };
      },
      (error: unknown) => {
        this.outcome = { error };
      },
    );
  }

  /** How the process ended, if it did. */
  get ended(): { result?: JobResult; error?: unknown } | undefined {
    return this.outcome;
  }

  /** Alive and able to make progress: started, not ended, not killed, not frozen. */
  get isActive(): boolean {
    return (
      this.running !== undefined && this.outcome === undefined && !this.gate.isKilled && !this.gate.isFrozen
    );
  }

  /** Resolves when `execute()` ended, or after `timeoutMs`. */
  async whenEnded(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const ended = await Promise.race([
      this.running?.then(() => true as const) ?? Promise.resolve(true as const),
      timedOut,
    ]);
    clearTimeout(timer);
    return ended;
  }

  /** How many times the job created its readers: grows with each attempt. */
  get attempts(): number {
    return this.source.readers.length;
  }

  /** True when the readers of the current attempt read every record that arrived. */
  caughtUp(): boolean {
    const readers = this.source.readers;
    const current = readers.slice(-(this.options.subtaskIndex === undefined ? this.options.parallelism : 1));
    return current.length > 0 && current.every((reader) => reader.caughtUp());
  }

  /** Asks for a checkpoint now when the job can take one on demand; otherwise the periodic one comes. */
  triggerCheckpoint(): void {
    const job = this.job as unknown as TriggerableJob;
    job.triggerCheckpoint?.().catch(() => undefined);
  }

  kill(): void {
    if (!this.gate.isKilled) this.options.target.processKilled?.(this.host).catch(() => undefined);
    this.gate.kill();
    // A killed process must not restart in-process either: stop it (its final checkpoint hangs at the gate).
    this.job.stop();
  }
}
