import type { CompletedCheckpoint } from "../checkpoint-storage.js";
import { createCompletedCheckpoint } from "../completed-checkpoint.js";

/**
 * A consistent checkpoint for tests of checkpoint storages and tools: fixed timestamps, string or
 * buffer states, metadata (sizes, checksums) computed from them.
 *
 * @example
 * ```ts
 * const checkpoint = createTestCheckpoint({ jobId: "orders", checkpointId: 3, states: ["a", "b"] });
 * ```
 */
export function createTestCheckpoint(options: {
  jobId: string;
  checkpointId: number;
  scope?: string;
  states?: readonly (string | Buffer)[];
  parallelism?: number;
  isFinal?: boolean;
  summary?: Record<string, unknown>;
  subtaskIndexes?: readonly number[];
  /** The writer's incarnation (see `CheckpointStorage.claimIncarnation`); absent: never fenced. */
  incarnation?: number;
}): CompletedCheckpoint {
  const states = options.states ?? ["state-0", "state-1"];
  const subtaskStates = new Map<number, Buffer>();
  for (const [position, state] of states.entries()) {
    subtaskStates.set(options.subtaskIndexes?.[position] ?? position, Buffer.from(state));
  }
  return createCompletedCheckpoint({
    jobId: options.jobId,
    checkpointId: options.checkpointId,
    scope: options.scope ?? "all",
    parallelism: options.parallelism ?? Math.max(1, states.length),
    subtaskStates,
    triggeredAt: 1_700_000_000_000 + options.checkpointId * 1000,
    completedAt: 1_700_000_000_500 + options.checkpointId * 1000,
    isFinal: options.isFinal ?? false,
    summary: options.summary ?? { operators: ["source", "sink"] },
    ...(options.incarnation === undefined ? {} : { incarnation: options.incarnation }),
  });
}
