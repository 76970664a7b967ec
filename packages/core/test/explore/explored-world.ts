import { setTimeout as sleep } from "node:timers/promises";
import { MemoryCheckpointStorage, type RestoreSetting } from "../../src/index.js";
import { storedCheckpointsReference } from "./checkpoint-references.js";
import { ControlledInput } from "./controlled-source.js";
import { ExploredProcess } from "./explored-process.js";
import { describeRow, keyedReference } from "./keyed-job.js";
import type { SinkUnderTest } from "./sink-under-test.js";
import { SteppedWallClock } from "./wall-clock.js";

/** The shape of one explored case. */
export interface WorldSettings {
  /** One process per subtask, or one process running every subtask. */
  readonly deployment: "per-subtask" | "single";
  readonly parallelism: number;
  readonly splits: number;
  readonly recordsPerSplit: number;
  readonly tolerableFailures: number;
  /**
   * The keyed job (`keyBy`, a running count and a window count per key: `keyed-job.ts`), its
   * results checked against the reference computed from the input; only in one process.
   */
  readonly keyed?: boolean;
}

/** How the final phase ended, and what the property found. */
export interface Verdict {
  readonly ok: boolean;
  readonly problems: string[];
}

const SETTLE_LIMIT_MS = 60;
const FINAL_PHASE_LIMIT_MS = 8_000;

/**
 * Everything one explored case runs against: the shared checkpoint storage, the input, the external
 * system and its sink, the stepped wall clock, and every process ever started (the deployment of
 * the current parallelism, zombies, dead ones). Commands act on it; {@link ExploredWorld.finish}
 * kills everything, runs a fresh deployment to the end of the input and checks the property.
 *
 * @example
 * ```ts
 * const world = new ExploredWorld(settings, inMemorySinkUnderTest());
 * world.startProcess(0);
 * const verdict = await world.finish([0, 1]);
 * ```
 */
export class ExploredWorld {
  /** The shared checkpoint storage; a reset replaces it with an empty one. */
  storage = new MemoryCheckpointStorage();
  readonly input: ControlledInput;
  readonly clock = new SteppedWallClock();
  readonly processes: ExploredProcess[] = [];
  readonly jobId = "explore";
  parallelism: number;
  /**
   * The restore setting of the current deployment (its pods' arguments): every process started for
   * it uses it — a pod restarted by Kubernetes, a late pod, the final phase.
   */
  restore: RestoreSetting = "latest";
  /** The run: a fresh start (`"none"`) or a storage reset begins a new one, whose output starts over. */
  generation = 0;
  /** The highest run begun so far: a run left (a named restore going back) is never begun again. */
  private runsBegun = 0;
  private readonly generationOf = new Map<string, number>();
  /** The run of the process that stored each checkpoint id: a named restore goes on with that run. */
  private readonly runOfCheckpoint = new Map<number, number>();
  /** Problems found while the case ran (not only at its end). */
  private readonly endChecks: Promise<string | undefined>[] = [];
  private readonly liveProblems: string[] = [];
  /** Per scope, the newest process (by start) that claimed it so far. */
  private readonly scopeOwners = new Map<string, ExploredProcess>();
  /** The newest process of each subtask (per-subtask) or of the whole job (single, key 0). */
  private readonly newest = new Map<number, ExploredProcess>();

  constructor(
    readonly settings: WorldSettings,
    readonly target: SinkUnderTest,
  ) {
    this.input = new ControlledInput(settings.splits, settings.recordsPerSplit);
    this.parallelism = settings.parallelism;
  }

  /** Subtask slots of the current deployment: one per subtask, or one for the single process. */
  get slots(): number {
    return this.settings.deployment === "single" ? 1 : this.parallelism;
  }

  newestOf(slot: number): ExploredProcess | undefined {
    return this.newest.get(slot % this.slots);
  }

  /**
   * Starts a new process for `slot` with the deployment's restore setting; an older one of that slot
   * stays as it is (killed, frozen or live: a zombie).
   */
  startProcess(slot: number): ExploredProcess {
    const single = this.settings.deployment === "single";
    const name = `p${this.processes.length}`;
    this.generationOf.set(name, this.generation);
    const { storage, generation } = this;
    const process = new ExploredProcess({
      name,
      generation,
      jobId: this.jobId,
      parallelism: this.parallelism,
      subtaskIndex: single ? undefined : slot % this.slots,
      storage,
      input: this.input,
      target: this.target,
      restore: this.restore,
      tolerableFailures: this.settings.tolerableFailures,
      keyed: this.settings.keyed === true,
      storageObserver: {
        claimed: (scope) => this.takeOver(scope, process),
        stored: (scope, checkpointId) => {
          if (storage === this.storage) this.runOfCheckpoint.set(checkpointId, generation);
          this.checkNewestWins(scope, checkpointId, process);
        },
      },
      onAttemptEnded: (ended, transactionIds) => {
        this.endChecks.push(this.checkNothingOrphaned(ended, transactionIds));
      },
    });
    this.processes.push(process);
    this.newest.set(slot % this.slots, process);
    process.start();
    return process;
  }

  /**
   * The job's newest point, to restore by its id: the highest checkpoint id of the current lineage
   * (the lineage of the highest id). Every subtask's state at it is its newest, so restoring it goes
   * back nowhere — once every process is stopped. Undefined when nothing is stored.
   */
  async newestCheckpointId(): Promise<number | undefined> {
    const all = await this.storage.list(this.jobId);
    return all.length === 0 ? undefined : Math.max(...all.map((each) => each.checkpointId));
  }

  /** True when the current lineage's base records a fresh start (`"none"`), carried through rescales. */
  private async currentLineageStartedEmpty(): Promise<boolean> {
    const all = await this.storage.list(this.jobId);
    const newest = all.reduce<(typeof all)[number] | undefined>(
      (found, each) => (found === undefined || each.checkpointId > found.checkpointId ? each : found),
      undefined,
    );
    const lineage = newest?.lineage ?? 0;
    const base = all.find((each) => each.scope === "base" && each.checkpointId === lineage);
    return (base?.summary.base as { startedBy?: unknown } | undefined)?.startedBy === "none";
  }

  /**
   * A new deployment with new arguments: every process is killed (the old deployment is stopped
   * first, as a named restore or a fresh start requires), the storage optionally reset (emptied),
   * and `slots` processes of the new parallelism start in StatefulSet order with `restore`. A fresh
   * start or a reset begins a new run: the output starts over.
   */
  async redeploy(
    parallelism: number,
    restore: "latest" | "none" | "newest-by-id",
    options: { reset?: boolean; startNow?: number } = {},
  ): Promise<void> {
    for (const process of this.processes) process.kill();
    this.newest.clear();
    if (options.reset === true) {
      this.storage = new MemoryCheckpointStorage();
      this.runOfCheckpoint.clear();
    }
    if (restore === "newest-by-id") {
      const newest = await this.newestCheckpointId();
      this.restore = newest === undefined ? "latest" : { checkpointId: newest };
      // The named checkpoint's run goes on: a fresh start whose processes never stored a checkpoint
      // (none started, or all died before their base) left no trace, so it began no run.
      if (newest !== undefined) this.generation = this.runOfCheckpoint.get(newest) ?? this.generation;
    } else {
      this.restore = restore;
    }
    // "none" is applied once: while the current lineage carries it, it is not applied again (the
    // core README's restore rule): the run goes on.
    const startsOver = restore === "none" && !(await this.currentLineageStartedEmpty());
    if (options.reset === true || startsOver) this.generation = ++this.runsBegun;
    this.parallelism = parallelism;
    for (let slot = 0; slot < Math.min(options.startNow ?? this.slots, this.slots); slot++) {
      this.startProcess(slot);
      await this.settle();
    }
  }

  /** A new parallelism: the current deployment is killed (or frozen, as zombies); no process of the new one runs yet. */
  rescale(parallelism: number, old: "kill" | "freeze"): void {
    for (const process of this.newest.values()) {
      if (old === "kill") process.kill();
      else process.gate.freeze();
    }
    this.newest.clear();
    this.parallelism = parallelism;
  }

  /** Lets the processes work: until every active one read what arrived, and a little longer for commits. */
  async settle(): Promise<void> {
    const deadline = Date.now() + SETTLE_LIMIT_MS;
    while (Date.now() < deadline && this.processes.some((each) => each.isActive && !each.caughtUp())) {
      await sleep(1);
    }
    await sleep(2);
  }

  /**
   * The final phase: kills every process, lets the whole input arrive, starts a fresh deployment in
   * `order`, runs it to the end and checks that the visible output is the input exactly once and
   * that nothing stays open or prepared.
   */
  async finish(order: readonly number[], staggered = false): Promise<Verdict> {
    for (const process of this.processes) process.kill();
    this.newest.clear();
    const fresh: ExploredProcess[] = [];
    for (const slot of [
      ...order.filter((each) => each < this.slots),
      ...Array.from({ length: this.slots }, (_, index) => index),
    ]) {
      if (this.newest.has(slot)) continue;
      fresh.push(this.startProcess(slot));
      // Staggered: the first process restores and completes a checkpoint before the next starts.
      if (staggered && fresh.length === 1 && this.slots > 1) await this.checkpointOnce(fresh[0]!);
    }
    this.input.arriveAll();
    const problems: string[] = [];
    const limit = this.target.finalPhaseLimitMs ?? FINAL_PHASE_LIMIT_MS;
    for (const process of fresh) {
      if (!(await process.whenEnded(limit))) {
        problems.push(`${process.name} (final phase) did not finish within ${limit} ms`);
      } else if (process.ended?.error !== undefined) {
        problems.push(`${process.name} (final phase) failed: ${describe(process.ended.error)}`);
      }
    }
    for (const problem of await Promise.all(this.endChecks))
      if (problem !== undefined) problems.push(problem);
    problems.push(...this.liveProblems.slice(0, 5));
    problems.push(...(await this.checkOutput()));
    const leftovers = await this.target.leftovers();
    if (leftovers.length > 0) problems.push(`left open or prepared: ${leftovers.slice(0, 8).join("; ")}`);
    return { ok: problems.length === 0, problems };
  }

  /**
   * The visible output is the input exactly once. After a fresh start or a storage reset the output
   * starts over: the last run's is the input exactly once, and no earlier run's holds a value twice.
   */
  private async checkOutput(): Promise<string[]> {
    if (this.generation === 0) return this.checkResults(await this.target.visible());
    if (this.target.visibleByWriter === undefined) {
      return [`${this.target.name} cannot tell which run wrote what: explore fresh starts in memory`];
    }
    const byRun = new Map<number, number[]>();
    for (const { writer, values } of await this.target.visibleByWriter()) {
      const run = this.generationOf.get(writer) ?? 0;
      byRun.set(run, [...(byRun.get(run) ?? []), ...values]);
    }
    const problems = this.checkResults(byRun.get(this.generation) ?? []).map(
      (problem) => `run ${this.generation} (the last): ${problem}`,
    );
    for (const [run, values] of byRun) {
      if (run === this.generation) continue;
      const duplicated = values.filter((value, index) => values.indexOf(value) !== index);
      if (duplicated.length > 0) {
        problems.push(`run ${run}: duplicated ${duplicated.length}: ${duplicated.slice(0, 12).join(",")}`);
      }
    }
    return problems;
  }

  /** The input exactly once, or for the keyed job its results: the reference computed from the input. */
  private checkResults(visible: readonly number[]): string[] {
    if (this.settings.keyed !== true) {
      return checkExactlyOnce(
        visible,
        Array.from({ length: this.input.total }, (_, value) => value),
        String,
      );
    }
    return checkExactlyOnce(visible, keyedReference(this.input.splits, this.input.perSplit), describeRow).map(
      (problem) => `keyed results: ${problem}`,
    );
  }

  private async checkpointOnce(process: ExploredProcess): Promise<void> {
    const deadline = Date.now() + 10 * SETTLE_LIMIT_MS;
    while (process.attempts === 0 && Date.now() < deadline) await sleep(1);
    const calls = process.storage.storeCalls;
    process.triggerCheckpoint();
    const storing = () =>
      process.storage.storeCalls === calls || process.storage.storesEnded < process.storage.storeCalls;
    while (storing() && process.isActive && Date.now() < deadline) await sleep(1);
    await this.settle();
  }

  // Invariant 4: once a newer process claimed a scope, no older one may store in it again.
  private takeOver(scope: string, process: ExploredProcess): void {
    const owner = this.scopeOwners.get(scope);
    if (owner === undefined || this.processes.indexOf(owner) <= this.processes.indexOf(process)) {
      this.scopeOwners.set(scope, process);
    }
  }

  private checkNewestWins(scope: string, checkpointId: number, process: ExploredProcess): void {
    const owner = this.scopeOwners.get(scope);
    if (scope === "base" || owner === undefined) return;
    if (this.processes.indexOf(owner) > this.processes.indexOf(process)) {
      this.liveProblems.push(
        `${process.name} stored checkpoint ${checkpointId} of scope ${scope} after the newer ${owner.name} had claimed that scope: an older incarnation made progress`,
      );
    }
  }

  // Invariant 6: what an attempt prepared must not outlive it unless a stored checkpoint carries it.
  private async checkNothingOrphaned(
    process: ExploredProcess,
    transactionIds: readonly string[],
  ): Promise<string | undefined> {
    const unfinished = this.target.unfinished?.(transactionIds) ?? [];
    const orphaned: string[] = [];
    for (const id of unfinished) {
      if (!(await storedCheckpointsReference(this.storage, this.jobId, id))) orphaned.push(id);
    }
    if (orphaned.length === 0) return undefined;
    return `an attempt of ${process.name} ended leaving ${orphaned.join(", ")} open or prepared, which no stored checkpoint carries`;
  }

  /** Puts the clock back and lets go of every process. */
  async dispose(): Promise<void> {
    this.clock.restore();
    for (const process of this.processes) process.kill();
    await this.target.close?.();
  }
}

/** `visible` holds every value of `expected` once and nothing else; `name` says what a value means. */
function checkExactlyOnce(
  visible: readonly number[],
  expected: readonly number[],
  name: (value: number) => string,
): string[] {
  const counts = new Map<number, number>();
  for (const value of visible) counts.set(value, (counts.get(value) ?? 0) + 1);
  const wanted = new Set(expected);
  const duplicated = [...counts].filter(([, count]) => count > 1).map(([value]) => value);
  const unexpected = [...counts.keys()].filter((value) => !wanted.has(value));
  const missing = expected.filter((value) => !counts.has(value));
  const list = (values: readonly number[]) => values.slice(0, 12).map(name).join(", ");
  const problems: string[] = [];
  if (duplicated.length > 0) problems.push(`duplicated ${duplicated.length}: ${list(duplicated)}`);
  if (missing.length > 0) problems.push(`missing ${missing.length}: ${list(missing)}`);
  if (unexpected.length > 0) problems.push(`not in the reference ${unexpected.length}: ${list(unexpected)}`);
  if (problems.length > 0)
    problems.unshift(`visible ${visible.length} values for ${expected.length} expected`);
  return problems;
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: string }).code;
    return `${code ? `[${code}] ` : ""}${error.message}`;
  }
  return String(error);
}
