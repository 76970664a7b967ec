import type { Logger, RuntimeContext } from "@onceflow/core";
import { listTransactionsOver } from "../admin/kafka-transactions.js";
import type { KafkaConnection } from "../internal/kafkajs/internals.js";
import { jobsClaimingPrefix } from "./prefix-claims.js";
import { TransactionalIdPool } from "./transactional-id-pool.js";

/**
 * Which transactional ids an attempt of one subtask cleans up at start.
 *
 * @example
 * ```ts
 * const scope: LingeringScope = { prefix: "orders-out", subtaskIndex: 0, parallelism: 2, incarnation: 7,
 *   recoveredSubtasks: [0, 2], recovered: new Set(["orders-out-0-6-1"]), knownIncarnations: new Set([6]),
 *   poolSize: 5 };
 * ```
 */
export interface LingeringScope {
  readonly prefix: string;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  /** This attempt's incarnation: ids of newer incarnations are never touched. */
  readonly incarnation: number;
  /** The old subtasks whose transactions this attempt recovered (`recoveredSubtaskIndexes()`). */
  readonly recoveredSubtasks: readonly number[];
  /** Ids committed from the restored checkpoint: a second restore of it must still find their epoch. */
  readonly recovered: ReadonlySet<string>;
  /** Incarnations named by the restored transactions' ids (for the fallback without ListTransactions). */
  readonly knownIncarnations: ReadonlySet<number | undefined>;
  /** The largest pool size in use now or in the restored checkpoint (for the fallback). */
  readonly poolSize: number;
  /**
   * Asks the checkpoint storage for the job's newest incarnation (`RuntimeContext.incarnationSeries`),
   * after the listing: an id of a higher incarnation was never handed out by this storage — it is
   * of the run before a reset of the storage (incarnations count from 1 again), so it is fenced.
   * Without it, every id of a higher incarnation is taken for a newer process's.
   */
  readonly newestIncarnation?: () => Promise<number>;
}

/** Transaction states with something open on the id (or an epoch a writer may still use). */
const UNENDED_STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"];
const LIST_ATTEMPTS = 3;

/**
 * Whether old subtask `subtask` is this subtask's to clean up: one it recovered, or one beyond the
 * current parallelism that maps to it (as `TwoPhaseCommitSink` deals old subtasks out: `s % parallelism`)
 * — so ids of a larger earlier parallelism are found on a fresh start too.
 */
function owns(scope: LingeringScope, subtask: number): boolean {
  return (
    subtask === scope.subtaskIndex ||
    scope.recoveredSubtasks.includes(subtask) ||
    (subtask >= scope.parallelism && subtask % scope.parallelism === scope.subtaskIndex)
  );
}

/**
 * Finds the transactional ids that earlier attempts of this subtask may have left a transaction
 * open on: ListTransactions filtered by the sink's prefix (Kafka 3.0+), keeping the ids of the
 * subtasks this one owns, of this or an older incarnation (never a newer one: that is the process
 * that replaced this one — unless the checkpoint storage never handed that incarnation out: then
 * it is of the run before a reset of the storage), that are not ended and were not just
 * recovered. Every slot and every incarnation is seen, whatever the pool size or parallelism was.
 * The same listing shows the jobs that claimed the prefix (`claimedBy`, see `prefix-claims.ts`).
 *
 * When the brokers refuse ListTransactions (before Kafka 3.0, or a coordinator that keeps
 * answering an error), it falls back to the ids it can name — every slot of the incarnations the
 * restored checkpoint names, of this incarnation and of the id format without incarnation — and
 * warns: transactions an attempt that never completed a checkpoint left open then linger until
 * their transaction timeout.
 *
 * @example
 * ```ts
 * const { ids } = await findLingeringTransactionalIds(connection, scope, logger);
 * for (const id of ids) await connection.fence(id, timeoutMs);
 * ```
 */
export async function findLingeringTransactionalIds(
  connection: KafkaConnection,
  scope: LingeringScope,
  logger: Logger,
): Promise<{ ids: string[]; listed: boolean; claimedBy: string[] }> {
  let failure: unknown;
  for (let attempt = 1; attempt <= LIST_ATTEMPTS; attempt++) {
    let found: Awaited<ReturnType<typeof listTransactionsOver>>;
    try {
      found = await listTransactionsOver(connection, {
        prefix: `${scope.prefix}-`,
        states: UNENDED_STATES,
      });
    } catch (error) {
      failure = error;
      if (attempt < LIST_ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
      continue;
    }
    // Read after the listing: every id of this series that it shows was claimed before.
    const newest =
      scope.newestIncarnation !== undefined &&
      found.some((transaction) => isOfHigherIncarnation(scope, transaction.transactionalId))
        ? await scope.newestIncarnation()
        : undefined;
    return {
      ids: selectLingeringIds(scope, found, newest),
      listed: true,
      claimedBy: jobsClaimingPrefix(
        scope.prefix,
        found.map((transaction) => transaction.transactionalId),
      ),
    };
  }
  const ids = fallbackTransactionalIds(scope);
  logger.warn(
    { err: failure, fencing: ids.length },
    `kafka sink: the brokers refused ListTransactions, so lingering transactions of earlier attempts cannot be found by prefix; fencing the ${ids.length} ids the restored checkpoint names instead. Transactions of attempts that never completed a checkpoint may hold read_committed consumers until their transaction timeout: use Kafka 3.0 or newer and allow DESCRIBE on the transactional ids "${scope.prefix}-*" to the sink's principal, or abort them with \`onceflow-kafka transactions abort --prefix ${scope.prefix}- --older-than <ms>\``,
  );
  return { ids, listed: false, claimedBy: [] };
}

/**
 * Of the listed transactions, the ids this attempt must fence: not ended, one of this prefix's
 * pooled ids, of a subtask this one owns, of this or an older incarnation (or without one) or of one
 * above the checkpoint storage's newest (`newestIncarnation`, a run before a storage reset), and
 * not just recovered.
 *
 * @example
 * ```ts
 * selectLingeringIds(scope, [{ transactionalId: "orders-out-0-6-3", state: "Ongoing" }]); // ["orders-out-0-6-3"]
 * ```
 */
export function selectLingeringIds(
  scope: LingeringScope,
  transactions: ReadonlyArray<{ readonly transactionalId: string; readonly state: string }>,
  newestIncarnation?: number,
): string[] {
  return transactions
    .filter((transaction) => UNENDED_STATES.includes(transaction.state))
    .map((transaction) => transaction.transactionalId)
    .filter((id) => isOwnedLeftover(scope, id, newestIncarnation));
}

/**
 * An id of an owned subtask of this or an older incarnation, or of an incarnation above the
 * storage's newest (`newestIncarnation`: the run before a reset of the checkpoint storage).
 */
function isOwnedLeftover(
  scope: LingeringScope,
  transactionalId: string,
  newestIncarnation?: number,
): boolean {
  if (scope.recovered.has(transactionalId)) return false;
  const parts = TransactionalIdPool.parse(scope.prefix, transactionalId);
  if (parts === undefined || !owns(scope, parts.subtaskIndex)) return false;
  return (
    parts.incarnation === undefined ||
    parts.incarnation <= scope.incarnation ||
    (newestIncarnation !== undefined && parts.incarnation > newestIncarnation)
  );
}

/** An id of an owned subtask of an incarnation above this attempt's: a newer process's, or of the run before a storage reset. */
function isOfHigherIncarnation(scope: LingeringScope, transactionalId: string): boolean {
  const parts = TransactionalIdPool.parse(scope.prefix, transactionalId);
  return (
    parts !== undefined &&
    parts.incarnation !== undefined &&
    parts.incarnation > scope.incarnation &&
    owns(scope, parts.subtaskIndex) &&
    !scope.recovered.has(transactionalId)
  );
}

/**
 * The ids to fence when ListTransactions is refused: every slot of the incarnations named by the
 * restored checkpoint, of this incarnation and of the id format without incarnation, for this
 * subtask and the old subtasks it recovered; never a newer incarnation's, never a recovered id.
 *
 * @example
 * ```ts
 * fallbackTransactionalIds({ ...scope, knownIncarnations: new Set([6]), incarnation: 7, poolSize: 3 });
 * ```
 */
export function fallbackTransactionalIds(scope: LingeringScope): string[] {
  const subtasks = [...new Set([scope.subtaskIndex, ...scope.recoveredSubtasks])];
  const incarnations = new Set<number | undefined>([
    ...scope.knownIncarnations,
    scope.incarnation,
    undefined,
  ]);
  const ids: string[] = [];
  for (const subtask of subtasks) {
    for (const incarnation of incarnations) {
      if (incarnation !== undefined && incarnation > scope.incarnation) continue;
      for (let slot = 0; slot < scope.poolSize; slot++) {
        const id =
          incarnation === undefined
            ? `${scope.prefix}-${subtask}-${slot}`
            : TransactionalIdPool.idOf(scope.prefix, subtask, incarnation, slot);
        if (!scope.recovered.has(id)) ids.push(id);
      }
    }
  }
  return ids;
}

/**
 * The {@link LingeringScope.newestIncarnation} of an attempt: the checkpoint storage's, when the
 * runtime gave the attempt its incarnation series.
 *
 * @example
 * ```ts
 * const scope: LingeringScope = { ...facts, ...newestIncarnationOf(context) };
 * ```
 */
export function newestIncarnationOf(
  context: Pick<RuntimeContext, "incarnationSeries">,
): Pick<LingeringScope, "newestIncarnation"> {
  const series = context.incarnationSeries;
  return series === undefined ? {} : { newestIncarnation: () => series.newestIncarnation() };
}
