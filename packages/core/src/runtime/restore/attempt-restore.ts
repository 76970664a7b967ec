import type { CheckpointStorage } from "../../checkpoint/checkpoint-storage.js";
import type { Logger } from "../../observability/logger.js";
import type { StreamNode } from "../stream-graph.js";
import { planRestore, type RestorePlan, type RestoreSetting } from "./restore-plan.js";
import { describeStartRequest } from "./start-request.js";
import { checkStateClaims, claimRedistributedState, type StateClaims } from "./state-claims.js";

/**
 * What a job's restore is planned from: where its checkpoints are, its shape in this process, the
 * operators that claim restored state and whether unclaimed state may be dropped.
 *
 * @example
 * ```ts
 * const job: RestoringJob = { jobId: "orders", storage, parallelism: 2, localSubtasks: [0, 1], nodes, allowNonRestoredState: false, logger };
 * ```
 */
export interface RestoringJob {
  readonly jobId: string;
  /** Undefined with checkpointing off: then every attempt starts empty. */
  readonly storage: CheckpointStorage | undefined;
  readonly parallelism: number;
  /** The subtasks this process runs. */
  readonly localSubtasks: readonly number[];
  /** The operators as this process runs them: their uids claim state, their sources read splits. */
  readonly nodes: readonly StreamNode[];
  readonly allowNonRestoredState: boolean;
  readonly logger: Logger;
}

/**
 * Where an attempt restores from in its scope (the incarnation of which it has claimed).
 *
 * @example
 * ```ts
 * const request: AttemptRestoreRequest = { scope, incarnation: 3, runsAllSubtasks: true, setting: "latest" };
 * ```
 */
export interface AttemptRestoreRequest {
  readonly scope: string;
  readonly incarnation: number;
  readonly runsAllSubtasks: boolean;
  readonly setting: RestoreSetting;
}

const EMPTY_PLAN: RestorePlan = {
  checkpointId: undefined,
  highestStoredId: 0,
  lineage: 0,
  restoredFrom: [],
  operatorsOf: () => undefined,
};

/**
 * Plans what every subtask of this process restores in an attempt, then checks the state claims
 * before any operator starts: state that no operator claims is refused (`NON_RESTORED_STATE`), or
 * dropped with a warning if the job allows it. An empty plan with checkpointing off.
 *
 * @example
 * ```ts
 * const plan = await planAttemptRestore(job, { scope, incarnation, runsAllSubtasks: true, setting: "latest" });
 * const restored = plan.operatorsOf(0);
 * ```
 */
export async function planAttemptRestore(
  job: RestoringJob,
  request: AttemptRestoreRequest,
): Promise<RestorePlan> {
  const sources = new Map(
    job.nodes.flatMap((node) => (node.source ? [[node.uid, node.source] as const] : [])),
  );
  if (job.storage === undefined) return { ...EMPTY_PLAN };
  const claims = stateClaimsOf(job);
  const plan = await planRestore({
    storage: job.storage,
    jobId: job.jobId,
    scope: request.scope,
    incarnation: request.incarnation,
    shape: { parallelism: job.parallelism, runsAllSubtasks: request.runsAllSubtasks },
    claimRedistributed: (perSubtask, from) => claimRedistributedState(claims, perSubtask, from),
    refuseUnclaimed: (perSubtask, from) => {
      // Allowed, nothing is refused; the drop (and its warning) happens once, on the final state.
      if (!claims.allowNonRestoredState) {
        claimRedistributedState(claims, perSubtask, from);
      }
    },
    setting: request.setting,
    sources,
  });
  // Before any operator starts: state that no operator claims is refused, or dropped if allowed.
  checkStateClaims({
    ...claims,
    checkpointId: plan.checkpointId,
    restored: new Map(job.localSubtasks.map((index) => [index, plan.operatorsOf(index)])),
  });
  return plan;
}

/** What the state claims on restore are checked against: the job's uids and its option. */
function stateClaimsOf(job: RestoringJob): Omit<StateClaims, "checkpointId" | "restored"> {
  return {
    jobId: job.jobId,
    claimedUids: job.nodes.map((node) => node.uid),
    allowNonRestoredState: job.allowNonRestoredState,
    logger: job.logger,
  };
}

/**
 * Whether the plan restores the final checkpoint of a run whose bounded input had ended (every
 * checkpoint it restores from is one): bounded sources then resume at their end.
 *
 * @example
 * ```ts
 * if (restoresEndedInput(plan)) logger.info("the input had ended at the restored checkpoint");
 * ```
 */
export function restoresEndedInput(plan: RestorePlan): boolean {
  return (
    plan.restoredFrom.length > 0 &&
    plan.restoredFrom.every((metadata) => metadata.isFinal && metadata.summary.endedBy === "end-of-input")
  );
}

/**
 * Logs what the plan does: what `restore: "none"` or a named checkpoint did (started a lineage, or
 * was applied before), and the checkpoint restored, if any.
 *
 * @example
 * ```ts
 * logRestorePlan(logger, plan, incarnation);
 * ```
 */
export function logRestorePlan(logger: Logger, plan: RestorePlan, incarnation: number): void {
  logStartRequest(logger, plan);
  if (plan.checkpointId !== undefined) {
    logger.info(
      {
        checkpointId: plan.checkpointId,
        lineage: plan.lineage,
        incarnation,
        from: plan.restoredFrom.map((m) => `${m.scope}#${m.checkpointId}`),
      },
      "restoring checkpoint",
    );
  }
}

/** Says what `restore: "none"` or a named checkpoint did: started a lineage, or was applied before. */
function logStartRequest(logger: Logger, plan: RestorePlan): void {
  if (plan.started !== undefined) {
    const { request, derivedFrom } = plan.started;
    logger.info(
      { restore: request, lineage: plan.lineage, baseCheckpointId: plan.lineage, derivedFrom },
      request === "none"
        ? `restore "none": starting empty as lineage ${plan.lineage} (its empty base checkpoint ${plan.lineage} records the fresh start); processes started later with the same setting go on from this lineage's latest checkpoint`
        : `restoring checkpoint ${request.checkpointId} as lineage ${plan.lineage}: base checkpoint ${plan.lineage} holds every subtask's state at checkpoint ${request.checkpointId} and records the restore; processes started later with the same setting go on from this lineage's latest checkpoint instead of going back to checkpoint ${request.checkpointId}`,
    );
  }
  if (plan.alreadyApplied !== undefined) {
    const { request, baseCheckpointId } = plan.alreadyApplied;
    logger.info(
      { restore: request, lineage: plan.lineage, baseCheckpointId, checkpointId: plan.checkpointId },
      `${describeStartRequest(request)} skipped: it was applied already (lineage ${baseCheckpointId} started from it), so this process goes on from ${plan.checkpointId === undefined ? "empty state in that lineage (none of its checkpoints is for this process yet)" : `checkpoint ${plan.checkpointId}, the latest of that lineage for this process`}. To apply it again, restore that lineage's base checkpoint ${baseCheckpointId} by its id`,
    );
  }
}

/**
 * Warns when the plan restores a named checkpoint although a newer one exists: what was committed
 * after it is produced again.
 *
 * @example
 * ```ts
 * warnIfNewerCheckpointExists(logger, plan);
 * ```
 */
export function warnIfNewerCheckpointExists(logger: Logger, plan: RestorePlan): void {
  const named = plan.started?.request;
  if (plan.newerCheckpointId !== undefined && named !== undefined && named !== "none") {
    logger.warn(
      { checkpointId: named.checkpointId, newestCheckpointId: plan.newerCheckpointId },
      `restoring checkpoint ${named.checkpointId} although checkpoint ${plan.newerCheckpointId} is newer: the output committed after checkpoint ${named.checkpointId} is produced again (duplicates in the sinks) and state goes back`,
    );
  }
}

/**
 * Warns that a run restored the final checkpoint of a run whose input had ended and its input
 * ended again: it read nothing, and says how to run the job from the start.
 *
 * @example
 * ```ts
 * warnResumedAtEndOfInput(logger, result.restoredCheckpointId);
 * ```
 */
export function warnResumedAtEndOfInput(logger: Logger, checkpointId: number | undefined): void {
  logger.warn(
    { checkpointId },
    `the job restored checkpoint ${checkpointId}, the final checkpoint of a run whose input had ended, and its input ended again: bounded sources resumed at their end, so nothing was read again. To run the job from the start, use a new jobId or empty checkpoint storage, or start it once with restore: "none" (applied once: a process started again with "none" goes on from that fresh start's latest checkpoint)`,
  );
}
