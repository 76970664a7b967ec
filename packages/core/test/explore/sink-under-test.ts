import type { Sink } from "../../src/index.js";
import type { ProcessGate } from "./process-gate.js";
import type { CommitFault } from "./transactional-system.js";

/** What a sink under test gets from the process that runs it. */
export interface SinkHost {
  readonly name: string;
  readonly gate: ProcessGate;
  /** Told when a sink instance of the process closed (an attempt ended) with the transactions it began. */
  readonly attemptEnded?: (transactionIds: readonly string[]) => void;
  /** The run the process belongs to: a fresh start or a storage reset begins a new one (default 0). */
  readonly generation?: number;
}

/**
 * The external system an exploration writes to, with its sink: the in-memory model, or a real one
 * (files, Kafka, PostgreSQL). It reads back what became visible and what was left behind.
 *
 * @example
 * ```ts
 * const target: SinkUnderTest = inMemorySinkUnderTest();
 * job.sinkTo(() => target.createSink(host), { uid: "out" });
 * ```
 */
export interface SinkUnderTest {
  readonly name: string;
  /** A sink instance for one subtask of the process `host`. */
  createSink(host: SinkHost): Sink<number>;
  /** The values visible to a reader that sees committed data only. */
  visible(): Promise<number[]>;
  /**
   * The visible values by the process that wrote them (where the system can tell): what lets the
   * exploration start over (`restore: "none"`, a storage reset) and still check each run's output.
   */
  visibleByWriter?(): Promise<{ readonly writer: string; readonly values: readonly number[] }[]>;
  /** Transactions (or staged files) still open or prepared, described for the failure message. */
  leftovers(): Promise<string[]>;
  /** Which of these transactions are still open or prepared (where the system can tell). */
  unfinished?(transactionIds: readonly string[]): string[];
  /** Makes the next commit fail (only where the system can be told to). */
  injectCommitFault?(fault: CommitFault): void;
  /** Repeats a checkpoint notification directly on the newest sink instance of a process. */
  renotify?(host: SinkHost, kind: "complete" | "aborted", checkpointId: number): Promise<void>;
  /** The process was killed: cut what the external system holds open for it (its connections). */
  processKilled?(host: SinkHost): Promise<void>;
  /** Checkpoint ids the runtime told the process's sinks were aborted. */
  abortedIds?(host: SinkHost): number[];
  /**
   * How long a process of the final phase may take to run to its end before it counts as hung
   * (default 8 s). A real system on a loaded machine needs longer: a broker or server round trip
   * per checkpoint, restarts with real connections.
   */
  readonly finalPhaseLimitMs?: number;
  close?(): Promise<void>;
}
