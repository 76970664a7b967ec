import { DefaultOperatorStateStore } from "../../state/operator-state-store.js";
import { TRANSACTION_STATE_NAME } from "../transaction-state.js";
import type { HarnessCheckpoint } from "./sink-test-harness.js";

/**
 * A transaction handle as a {@link TwoPhaseCommitSink} stored it in a checkpoint: `pending`
 * (pre-committed for `checkpointId`) or `open` (begun after it).
 *
 * @example
 * ```ts
 * const largest = Math.max(...readHarnessTransactions(checkpoint).map((each) => each.handleBytes));
 * ```
 */
export interface HarnessTransaction {
  readonly kind: "pending" | "open";
  readonly checkpointId: number;
  /** The subtask that wrote it. */
  readonly subtaskIndex: number;
  /** Size of the serialized handle in the checkpoint (what `transactionSerializer` produced). */
  readonly handleBytes: number;
}

interface StoredEntry {
  readonly kind: "pending" | "open";
  readonly checkpointId: number;
  readonly transaction: Uint8Array;
  readonly subtaskIndex: number;
}

/**
 * The transaction handles a {@link TwoPhaseCommitSink} stored in a checkpoint taken by
 * {@link SinkTestHarness.snapshot}, with their serialized sizes — to check that a sink keeps its
 * handles small (ids, not records). Empty for a checkpoint of another kind of sink.
 *
 * @example
 * ```ts
 * const checkpoint = await harness.snapshot(3);
 * for (const each of readHarnessTransactions(checkpoint)) expect(each.handleBytes).toBeLessThan(1024);
 * ```
 */
export function readHarnessTransactions(checkpoint: HarnessCheckpoint): HarnessTransaction[] {
  if (checkpoint.state[TRANSACTION_STATE_NAME] === undefined) return [];
  const store = new DefaultOperatorStateStore(checkpoint.state);
  return store
    .getUnionListState<StoredEntry>({ name: TRANSACTION_STATE_NAME })
    .get()
    .map((entry) => ({
      kind: entry.kind,
      checkpointId: entry.checkpointId,
      subtaskIndex: entry.subtaskIndex,
      handleBytes: entry.transaction.byteLength,
    }));
}
