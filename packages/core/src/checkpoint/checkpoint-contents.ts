import { deserialize } from "node:v8";
import type { OperatorSnapshot } from "../runtime/operators/stream-operator.js";
import type { SubtaskSnapshot } from "../runtime/subtask.js";
import type { CheckpointMetadata, CompletedCheckpoint } from "./checkpoint-storage.js";

// The union list state in which TwoPhaseCommitSink keeps its transactions (see its `stateName`).
const SINK_TRANSACTIONS_STATE = "pending-transactions";
const DESCRIPTION_LIMIT = 160;

/**
 * A sink transaction recorded in a checkpoint: `pending` (pre-committed under `checkpointId`,
 * committed once that checkpoint completes) or `open` (begun after it, aborted on restore).
 *
 * @example
 * ```ts
 * const { transactions } = readSinkTransactions(await storage.load("orders", "all", 12));
 * transactions.filter((t) => t.kind === "pending").map((t) => `${t.sink}#${t.checkpointId}`);
 * ```
 */
export interface CheckpointTransaction {
  /** The sink operator's uid. */
  readonly sink: string;
  /** The subtask whose state holds it. */
  readonly subtaskIndex: number;
  readonly kind: "pending" | "open";
  readonly checkpointId: number;
  /** When the transaction began (ms since the epoch). */
  readonly startedAt: number;
  /** Size of the serialized transaction handle. */
  readonly handleBytes: number;
  /** The handle as short JSON when it is readable without the sink's serializer, else undefined. */
  readonly description: string | undefined;
}

/** What {@link readSinkTransactions} found. */
export interface CheckpointTransactions {
  readonly transactions: readonly CheckpointTransaction[];
  /** Subtasks whose state is not a onceflow subtask snapshot (written by a tool or a test). */
  readonly unreadableSubtasks: readonly number[];
}

/**
 * Reads every sink's transactions out of a loaded checkpoint's operator state: the sinks built on
 * `TwoPhaseCommitSink` keep them there. Used by `onceflow checkpoints inspect` and the dashboard.
 * State that is not a onceflow subtask snapshot is reported, never thrown.
 *
 * @example
 * ```ts
 * const { transactions } = readSinkTransactions(await storage.load("orders", "all", 12));
 * ```
 */
export function readSinkTransactions(checkpoint: CompletedCheckpoint): CheckpointTransactions {
  const transactions: CheckpointTransaction[] = [];
  const unreadableSubtasks: number[] = [];
  for (const [subtaskIndex, bytes] of [...checkpoint.subtaskStates].sort(([a], [b]) => a - b)) {
    const snapshot = readSnapshot(bytes);
    if (snapshot === undefined) {
      unreadableSubtasks.push(subtaskIndex);
      continue;
    }
    for (const [sink, operator] of Object.entries(snapshot.operators)) {
      for (const entry of sinkTransactionsOf(operator)) transactions.push({ sink, subtaskIndex, ...entry });
    }
  }
  transactions.sort(
    (a, b) =>
      a.sink.localeCompare(b.sink) || a.subtaskIndex - b.subtaskIndex || a.checkpointId - b.checkpointId,
  );
  return { transactions, unreadableSubtasks };
}

/**
 * The transactions in one operator's snapshot, when it is a sink built on `TwoPhaseCommitSink`
 * (none otherwise; elements that are not readable as transactions are left out).
 *
 * @example
 * ```ts
 * sinkTransactionsOf(snapshot.operators["out"]!).filter((t) => t.kind === "pending");
 * ```
 */
export function sinkTransactionsOf(
  operator: OperatorSnapshot,
): Omit<CheckpointTransaction, "sink" | "subtaskIndex">[] {
  const elements = operator.operatorState?.[SINK_TRANSACTIONS_STATE]?.elements ?? [];
  const transactions: Omit<CheckpointTransaction, "sink" | "subtaskIndex">[] = [];
  for (const element of elements) {
    const entry = readEntry(element);
    if (entry !== undefined) transactions.push(entry);
  }
  return transactions;
}

/** A source split's position as the checkpoint summary records it. */
export interface CheckpointSplitPosition {
  readonly splitKey: string;
  /** The subtask that read the split, when recorded. */
  readonly subtask: number | undefined;
  /** The split's checkpointed fields (offset, next index, file position …) as JSON. */
  readonly position: Readonly<Record<string, unknown>>;
}

/**
 * The source splits and their positions from a checkpoint's `summary.splits` (written by the
 * runtime with each source's own split serializer, so no state needs to be decoded).
 *
 * @example
 * ```ts
 * splitPositionsOf(metadata); // [{ splitKey: "orders-0", subtask: 0, position: { offset: "42" } }]
 * ```
 */
export function splitPositionsOf(metadata: CheckpointMetadata): CheckpointSplitPosition[] {
  const splits = metadata.summary.splits;
  if (typeof splits !== "object" || splits === null) return [];
  return Object.entries(splits as Record<string, unknown>)
    .map(([splitKey, value]) => {
      const fields: Record<string, unknown> =
        typeof value === "object" && value !== null ? { ...(value as Record<string, unknown>) } : { value };
      const subtask = typeof fields.subtask === "number" ? fields.subtask : undefined;
      delete fields.subtask;
      return { splitKey, subtask, position: fields };
    })
    .sort((a, b) => a.splitKey.localeCompare(b.splitKey, undefined, { numeric: true }));
}

function readSnapshot(bytes: Buffer): SubtaskSnapshot | undefined {
  try {
    const value = deserialize(bytes) as Partial<SubtaskSnapshot> | null;
    if (value?.formatVersion !== 1 || typeof value.operators !== "object" || value.operators === null) {
      return undefined;
    }
    return value as SubtaskSnapshot;
  } catch {
    return undefined;
  }
}

function readEntry(element: Uint8Array): Omit<CheckpointTransaction, "sink" | "subtaskIndex"> | undefined {
  let entry: Record<string, unknown>;
  try {
    entry = deserialize(element) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const { kind, checkpointId, startedAt, transaction } = entry;
  if ((kind !== "pending" && kind !== "open") || typeof checkpointId !== "number") return undefined;
  const handle = transaction instanceof Uint8Array ? transaction : new Uint8Array();
  return {
    kind,
    checkpointId,
    startedAt: typeof startedAt === "number" ? startedAt : 0,
    handleBytes: handle.length,
    description: describeHandle(handle),
  };
}

// The default transaction serializer is node:v8; a sink with its own may write JSON. Anything else
// is opaque without the sink's code: only its size is shown.
function describeHandle(handle: Uint8Array): string | undefined {
  let value: unknown;
  try {
    value = deserialize(handle);
  } catch {
    try {
      value = JSON.parse(Buffer.from(handle).toString("utf8"));
    } catch {
      return undefined;
    }
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_key, item: unknown) => {
      if (typeof item === "bigint") return item.toString();
      if (item instanceof Uint8Array) return `<${item.length} bytes>`;
      return item;
    });
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  return text.length > DESCRIPTION_LIMIT ? `${text.slice(0, DESCRIPTION_LIMIT - 1)}…` : text;
}
