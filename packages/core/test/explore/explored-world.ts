import { setTimeout as sleep } from "node:timers/promises";
import { MemoryCheckpointStorage, type RestoreSetting } from "../../src/index.js";
import { ControlledInput } from "./controlled-source.js";
import { ExploredProcess } from "./explored-process.js";
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
  readonly storage = new MemoryCheckpointStorage();
  readonly input: ControlledInput;
  readonly clock = new SteppedWallClock();
  readonly processes: ExploredProcess[] = [];
  readonly jobId = "explore";
  parallelism: number;
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

  /** Starts a new process for `slot`; an older one of that slot stays as it is (killed, frozen or live: a zombie). */
  startProcess(slot: number, restore: RestoreSetting = "latest"): ExploredProcess {
    const single = this.settings.deployment === "single";
    const process = new ExploredProcess({
      name: `p${this.processes.length}`,
      jobId: this.jobId,
      parallelism: this.parallelism,
      subtaskIndex: single ? undefined : slot % this.slots,
      storage: this.storage,
      input: this.input,
      target: this.target,
      restore,
      tolerableFailures: this.settings.tolerableFailures,
    });
    this.processes.push(process);
    this.newest.set(slot % this.slots, process);
    process.start();
    return process;
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
  async finish(order: readonly number[]): Promise<Verdict> {
    for (const process of this.processes) process.kill();
    this.newest.clear();
    this.input.arriveAll();
    const fresh: ExploredProcess[] = [];
    for (const slot of [...order.filter((each) => each < this.slots), ...Array.from({ length: this.slots }, (_, index) => index)]) {
      if (!this.newest.has(slot)) fresh.push(this.startProcess(slot));
    }
    const problems: string[] = [];
    for (const process of fresh) {
      if (!(await process.whenEnded(FINAL_PHASE_LIMIT_MS))) {
        problems.push(`${process.name} (final phase) did not finish within ${FINAL_PHASE_LIMIT_MS} ms`);
      } else if (process.ended?.error !== undefined) {
        problems.push(`${process.name} (final phase) failed: ${describe(process.ended.error)}`);
      }
    }
    problems.push(...checkExactlyOnce(await this.target.visible(), this.input.total));
    const leftovers = await this.target.leftovers();
    if (leftovers.length > 0) problems.push(`left open or prepared: ${leftovers.slice(0, 8).join("; ")}`);
    return { ok: problems.length === 0, problems };
  }

  /** Puts the clock back and lets go of every process. */
  async dispose(): Promise<void> {
    this.clock.restore();
    for (const process of this.processes) process.kill();
    await this.target.close?.();
  }
}

function checkExactlyOnce(visible: readonly number[], total: number): string[] {
  const counts = new Map<number, number>();
  for (const value of visible) counts.set(value, (counts.get(value) ?? 0) + 1);
  const duplicated = [...counts].filter(([, count]) => count > 1).map(([value]) => value);
  const missing: number[] = [];
  for (let value = 0; value < total; value++) if (!counts.has(value)) missing.push(value);
  const problems: string[] = [];
  if (duplicated.length > 0) problems.push(`duplicated ${duplicated.length}: ${duplicated.slice(0, 12).join(",")}`);
  if (missing.length > 0) problems.push(`missing ${missing.length}: ${missing.slice(0, 12).join(",")}`);
  if (problems.length > 0) problems.unshift(`visible ${visible.length} values for ${total} inputs`);
  return problems;
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: string }).code;
    return `${code ? `[${code}] ` : ""}${error.message}`;
  }
  return String(error);
}
