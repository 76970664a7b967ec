import { sinkTransactionsOf } from "../../checkpoint/checkpoint-contents.js";
import {
  type NonRestoredOperatorState,
  NonRestoredStateError,
  type OperatorStateKind,
} from "../../errors/onceflow-error.js";
import type { Logger } from "../../observability/logger.js";
import { TRANSACTION_STATE_NAME } from "../../sink/transaction-state.js";
import type { OperatorSnapshot } from "../operators/stream-operator.js";

// State compatibility on restore: state is matched to operators by uid, and state that no operator
// of the job claims (a renamed or removed uid) is refused unless the user allows dropping it —
// Flink's `--allowNonRestoredState`. Empty state is never refused (as in Flink): an operator that
// kept nothing loses nothing.

const KIND_ORDER: readonly OperatorStateKind[] = [
  "operator state",
  "keyed state",
  "source positions",
  "sink transactions",
];

/** What {@link checkStateClaims} looks at. */
export interface StateClaims {
  readonly jobId: string;
  /** The restored checkpoint, undefined on a fresh start. */
  readonly checkpointId: number | undefined;
  /** The restored operator state of each subtask this process runs, by subtask index. */
  readonly restored: ReadonlyMap<number, Readonly<Record<string, OperatorSnapshot>> | undefined>;
  /** The uids of the job's operators. */
  readonly claimedUids: readonly string[];
  /** Drop unclaimed state with a warning instead of refusing the restore. */
  readonly allowNonRestoredState: boolean;
  readonly logger: Logger;
}

/**
 * Finds the state in `restored` that no uid of `claimedUids` claims, one entry per unclaimed uid
 * with the kinds of state it holds; empty state is left out.
 *
 * @example
 * ```ts
 * findNonRestoredState(new Map([[0, plan.operatorsOf(0)]]), ["numbers", "out"]);
 * // [{ uid: "count", kinds: ["keyed state"], subtasks: [0], pendingTransactions: [], openTransactions: 0 }]
 * ```
 */
export function findNonRestoredState(
  restored: StateClaims["restored"],
  claimedUids: readonly string[],
): NonRestoredOperatorState[] {
  const claimed = new Set(claimedUids);
  const found = new Map<
    string,
    { kinds: Set<OperatorStateKind>; subtasks: Set<number>; transactions: Map<string, Transaction> }
  >();
  for (const [subtaskIndex, operators] of [...restored].sort(([a], [b]) => a - b)) {
    for (const [uid, snapshot] of Object.entries(operators ?? {})) {
      if (claimed.has(uid)) continue;
      const kinds = kindsOf(snapshot);
      if (kinds.size === 0) continue;
      const entry = found.get(uid) ?? { kinds: new Set(), subtasks: new Set(), transactions: new Map() };
      for (const kind of kinds) entry.kinds.add(kind);
      entry.subtasks.add(subtaskIndex);
      // A union list state is in every subtask's share after a rescale: count each transaction once.
      for (const transaction of sinkTransactionsOf(snapshot)) {
        entry.transactions.set(JSON.stringify(transaction), transaction);
      }
      found.set(uid, entry);
    }
  }
  return [...found]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([uid, { kinds, subtasks, transactions }]) => {
      const all = [...transactions.values()];
      return {
        uid,
        kinds: KIND_ORDER.filter((kind) => kinds.has(kind)),
        subtasks: [...subtasks],
        pendingTransactions: all
          .filter((transaction) => transaction.kind === "pending")
          .sort((a, b) => a.checkpointId - b.checkpointId)
          .map(({ checkpointId, description }) =>
            description === undefined ? { checkpointId } : { checkpointId, transaction: description },
          ),
        openTransactions: all.filter((transaction) => transaction.kind === "open").length,
      };
    });
}

type Transaction = ReturnType<typeof sinkTransactionsOf>[number];

/**
 * Checks that every piece of restored state has an operator of the job to go to. Unclaimed state
 * fails the restore with a {@link NonRestoredStateError} naming each unclaimed operator state and
 * how to fix it, unless `allowNonRestoredState` is set: then a warning names what is dropped (a
 * dropped sink's pending transactions are not committed, its open ones not aborted). Returns what
 * was dropped.
 *
 * @example
 * ```ts
 * checkStateClaims({ jobId, checkpointId: 7, restored, claimedUids: ["numbers", "out"], allowNonRestoredState: false, logger });
 * ```
 */
export function checkStateClaims(claims: StateClaims): readonly NonRestoredOperatorState[] {
  const { checkpointId } = claims;
  if (checkpointId === undefined) return [];
  const unclaimed = findNonRestoredState(claims.restored, claims.claimedUids);
  if (unclaimed.length === 0) return [];
  const listed = unclaimed.map(describe).join("; ");
  const operators = claims.claimedUids.map((uid) => `'${uid}'`).join(", ");
  if (!claims.allowNonRestoredState) {
    const pending = unclaimed.some((state) => state.pendingTransactions.length > 0);
    throw new NonRestoredStateError(
      `job '${claims.jobId}': checkpoint ${checkpointId} holds state that no operator of the job claims: ${listed}. ` +
        `State is matched to operators by uid, and the job's operators are ${operators}. ` +
        `Give the renamed operator its old uid back ({ uid: "…" }), or drop this state for good with the job option allowNonRestoredState: true (onceflow run --allow-non-restored-state)` +
        (pending
          ? "; a dropped sink's pending transactions are not committed by this job: to keep their output, run once with the old uid so that they are committed, then rename"
          : ""),
      { checkpointId, operators: unclaimed },
    );
  }
  const transactions = unclaimed.some(
    (state) => state.pendingTransactions.length > 0 || state.openTransactions > 0,
  );
  const handles = unclaimed.flatMap((state) =>
    state.pendingTransactions.flatMap((pending) =>
      pending.transaction === undefined
        ? []
        : [`'${state.uid}' checkpoint ${pending.checkpointId}: ${pending.transaction}`],
    ),
  );
  claims.logger.warn(
    { checkpointId, dropped: unclaimed },
    `allowNonRestoredState: dropping state of checkpoint ${checkpointId} that no operator of the job claims: ${listed}` +
      (transactions
        ? ". A dropped sink's transactions are given up: its pending ones are not committed by this job (output that the old run did not commit before it stopped is lost when the external system aborts them at its transaction timeout) and its open ones are not aborted (an open Kafka transaction holds back read_committed consumers until then; onceflow-kafka transactions abort ends it)"
        : "") +
      (handles.length > 0 ? `. Pending transactions given up: ${handles.join("; ")}` : ""),
  );
  return unclaimed;
}

/**
 * The same check on the state a rescale redistributed (`perSubtask`, from the old subtasks' `from`),
 * before it is stored as the new lineage's base checkpoint; the message names the newest checkpoint
 * of `from`. Refused, nothing is stored: an unclaimed source's splits cannot be placed where that
 * source would assign them, so a base made without it would misplace them for a later restore under
 * the old uid. Allowed, the unclaimed state is removed from `perSubtask` and the base is stored
 * without it: the decision is made once for every process of the new parallelism.
 *
 * @example
 * ```ts
 * claimRedistributedState({ jobId, claimedUids, allowNonRestoredState, logger }, perSubtask, oldSnapshots);
 * ```
 */
export function claimRedistributedState(
  claims: Omit<StateClaims, "restored" | "checkpointId">,
  perSubtask: Map<number, Record<string, OperatorSnapshot>>,
  from: readonly { readonly checkpointId: number }[],
): void {
  const checkpointId = Math.max(0, ...from.map((snapshot) => snapshot.checkpointId));
  checkStateClaims({ ...claims, checkpointId, restored: perSubtask });
  const claimed = new Set(claims.claimedUids);
  for (const [subtaskIndex, operators] of perSubtask) {
    perSubtask.set(
      subtaskIndex,
      Object.fromEntries(Object.entries(operators).filter(([uid]) => claimed.has(uid))),
    );
  }
}

function describe(state: NonRestoredOperatorState): string {
  const kinds = state.kinds.map((kind) => {
    if (kind !== "sink transactions") return kind;
    const parts: string[] = [];
    if (state.pendingTransactions.length > 0) {
      const ids = state.pendingTransactions.map((transaction) => transaction.checkpointId);
      parts.push(`${ids.length} pending (checkpoint ${[...new Set(ids)].join(", ")})`);
    }
    if (state.openTransactions > 0) parts.push(`${state.openTransactions} open`);
    return parts.length === 0 ? kind : `${kind}: ${parts.join(", ")}`;
  });
  return `operator '${state.uid}' (${kinds.join(", ")}; subtask ${state.subtasks.join(", ")})`;
}

function kindsOf(snapshot: OperatorSnapshot): Set<OperatorStateKind> {
  const kinds = new Set<OperatorStateKind>();
  for (const [field, value] of Object.entries(snapshot)) {
    // Scalars beside the state describe it (how keyed state is scoped, say): they are not state.
    if (typeof value !== "object" || !hasContent(value)) continue;
    if (field === "operatorState") {
      for (const [name, state] of Object.entries(snapshot.operatorState ?? {})) {
        if (state.elements.length > 0) {
          kinds.add(name === TRANSACTION_STATE_NAME ? "sink transactions" : "operator state");
        }
      }
    } else if (field === "splits") {
      kinds.add("source positions");
    } else if (field === "keyed" || field === "eventTimers" || field === "processingTimers") {
      kinds.add("keyed state");
    } else {
      // A field this version does not know is state all the same: never dropped unseen.
      kinds.add("operator state");
    }
  }
  return kinds;
}

/** Whether a snapshot field holds anything: empty arrays, objects and buffers do not. */
function hasContent(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (value instanceof Uint8Array) return value.length > 0;
  if (Array.isArray(value)) return value.some(hasContent);
  if (typeof value === "object") return Object.values(value).some(hasContent);
  return true;
}
