import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import type { ExploredProcess } from "./explored-process.js";
import { CHECKPOINT_TIMEOUT_MS, PERIODIC_INTERVAL_MS } from "./explored-process.js";
import type { ExploredWorld } from "./explored-world.js";

/** What the commands need to know beyond the world: nothing yet (every command is valid always). */
export type ExploreModel = Record<string, never>;

type ExploreCommand = fc.AsyncCommand<ExploreModel, ExploredWorld>;

/** A command that is valid in every state and says what it did. */
export abstract class WorldCommand implements ExploreCommand {
  check(): boolean {
    return true;
  }
  abstract run(model: ExploreModel, world: ExploredWorld): Promise<void>;
  abstract toString(): string;
}

export class Arrive extends WorldCommand {
  constructor(
    readonly split: number,
    readonly count: number,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.input.arrive(this.split % world.input.splits, this.count);
    await world.settle();
  }
  toString() {
    return `arrive(split ${this.split}, ${this.count})`;
  }
}

export class ArriveEverywhere extends WorldCommand {
  constructor(readonly count: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    for (let split = 0; split < world.input.splits; split++) world.input.arrive(split, this.count);
    await world.settle();
  }
  toString() {
    return `arrive(every split, ${this.count})`;
  }
}

/** Starts a process for a slot with the deployment's arguments: a pod Kubernetes (re)starts. */
export class StartProcess extends WorldCommand {
  constructor(readonly slot: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.startProcess(this.slot);
    await world.settle();
  }
  toString() {
    return `start(slot ${this.slot})`;
  }
}

/**
 * A new deployment with a restore setting in its arguments, the old one stopped first: the job's
 * newest checkpoint named by its id (it goes back nowhere, so the output stays exactly once), a
 * fresh start (`"none"`: the output starts over), or a reset of the checkpoint storage. The setting
 * stays in the arguments: every later start of a process — restarts, the final phase — uses it.
 */
export class Redeploy extends WorldCommand {
  constructor(
    readonly parallelism: number,
    readonly restore: "newest-by-id" | "none" | "reset-storage",
    /** How many processes of the new deployment start at once, in StatefulSet order (0 first). */
    readonly startNow: number,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    await world.redeploy(this.parallelism, this.restore === "reset-storage" ? "latest" : this.restore, {
      reset: this.restore === "reset-storage",
      startNow: this.startNow,
    });
  }
  toString() {
    const what =
      this.restore === "newest-by-id"
        ? "restore the newest checkpoint by its id"
        : this.restore === "none"
          ? 'restore "none"'
          : "checkpoint storage reset";
    return `redeploy(at ${this.parallelism}, ${what}, start ${this.startNow} in order)`;
  }
}

export class Checkpoint extends WorldCommand {
  constructor(
    readonly slot: number,
    /** `late`: held until the coordinator gave it up (and the next attempt began, if one does), then landed. */
    readonly outcome: "land" | "fail" | "hold" | "late",
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    const process = world.newestOf(this.slot);
    if (process === undefined) return;
    process.storage.plan(this.outcome === "late" ? "hold" : this.outcome);
    const calls = process.storage.storeCalls;
    process.triggerCheckpoint();
    // On demand or periodic: wait until this process's store began, and ended unless it is held.
    const deadline = Date.now() + 4 * PERIODIC_INTERVAL_MS;
    const storing = () =>
      process.storage.storeCalls === calls ||
      (process.storage.heldCount === 0 && process.storage.storesEnded < process.storage.storeCalls);
    while (storing() && process.isActive && Date.now() < deadline) await sleep(1);
    if (this.outcome === "late" && process.storage.heldCount > 0) await landAfterTimeout(process, "land");
    await world.settle();
  }
  toString() {
    return `checkpoint(slot ${this.slot}, store ${this.outcome === "late" ? "lands after its timeout" : this.outcome})`;
  }
}

/**
 * Records arrive on one split and a checkpoint is taken while they are on their way: the barrier
 * comes once the keyed job's running count processed `after` of them (0: in the same turn of the
 * event loop), so that one subtask loop is half way through a batch that crosses the `keyBy`
 * exchange when the others take the barrier — the case barrier alignment exists for.
 */
export class ArriveDuringCheckpoint extends WorldCommand {
  constructor(
    readonly slot: number,
    readonly split: number,
    readonly count: number,
    readonly after: number,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    const process = world.newestOf(this.slot);
    const processed = world.input.keyedRecordsProcessed;
    world.input.arrive(this.split % world.input.splits, this.count);
    if (process === undefined || !process.isActive) {
      await world.settle();
      return;
    }
    process.storage.plan("land");
    const calls = process.storage.storeCalls;
    for (let turn = 0; turn < 200 && world.input.keyedRecordsProcessed < processed + this.after; turn++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    process.triggerCheckpoint();
    const deadline = Date.now() + 4 * PERIODIC_INTERVAL_MS;
    const storing = () =>
      process.storage.storeCalls === calls ||
      (process.storage.heldCount === 0 && process.storage.storesEnded < process.storage.storeCalls);
    while (storing() && process.isActive && Date.now() < deadline) await sleep(1);
    await world.settle();
  }
  toString() {
    return `arrive-during-checkpoint(slot ${this.slot}, split ${this.split}, ${this.count}, barrier after ${this.after} processed)`;
  }
}

export class ReleaseHeldStore extends WorldCommand {
  constructor(
    readonly pick: number,
    readonly outcome: "land" | "fail",
    readonly late: boolean,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    const holding = world.processes.filter((process) => process.storage.heldCount > 0);
    const process = holding[this.pick % Math.max(1, holding.length)];
    if (process === undefined) return;
    if (this.late) await landAfterTimeout(process, this.outcome);
    else process.storage.releaseHeld(this.outcome);
    await world.settle();
  }
  toString() {
    return `release-held-store(pick ${this.pick}, ${this.outcome}${this.late ? ", after the timeout" : ""})`;
  }
}

// Lets the oldest held store of `process` go once the coordinator gave it up: after the timeout and,
// when the attempt fails over it, once the next attempt began (it restored the checkpoint before).
async function landAfterTimeout(process: ExploredProcess, outcome: "land" | "fail"): Promise<void> {
  const attempts = process.attempts;
  await sleep(CHECKPOINT_TIMEOUT_MS + 10);
  const deadline = Date.now() + CHECKPOINT_TIMEOUT_MS;
  while (process.attempts === attempts && process.isActive && Date.now() < deadline) await sleep(2);
  process.storage.releaseHeld(outcome);
}

export class Kill extends WorldCommand {
  constructor(readonly slot: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.newestOf(this.slot)?.kill();
    await world.settle();
  }
  toString() {
    return `kill(slot ${this.slot})`;
  }
}

export class Freeze extends WorldCommand {
  constructor(readonly slot: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.newestOf(this.slot)?.gate.freeze();
    await world.settle();
  }
  toString() {
    return `freeze(slot ${this.slot})`;
  }
}

export class Resume extends WorldCommand {
  constructor(readonly pick: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    const frozen = world.processes.filter((process) => process.gate.isFrozen);
    frozen[this.pick % Math.max(1, frozen.length)]?.gate.resume();
    await world.settle();
  }
  toString() {
    return `resume(frozen pick ${this.pick})`;
  }
}

export class Rescale extends WorldCommand {
  constructor(
    readonly parallelism: number,
    readonly old: "kill" | "freeze",
    /** How many processes of the new deployment start at once, in StatefulSet order (0 first). */
    readonly startNow = 0,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.rescale(this.parallelism, this.old);
    for (let slot = 0; slot < Math.min(this.startNow, world.slots); slot++) {
      world.startProcess(slot);
      await world.settle();
    }
  }
  toString() {
    return `rescale(to ${this.parallelism}, old processes ${this.old === "kill" ? "killed" : "frozen"}${this.startNow > 0 ? `, start ${this.startNow} in order` : ""})`;
  }
}

export class CheckpointEverywhere extends WorldCommand {
  async run(_: ExploreModel, world: ExploredWorld) {
    const active = world.processes.filter((process) => process.isActive);
    const calls = active.map((process) => process.storage.storeCalls);
    for (const process of active) process.triggerCheckpoint();
    const deadline = Date.now() + 4 * PERIODIC_INTERVAL_MS;
    const storing = (process: ExploredProcess, index: number) =>
      process.isActive &&
      (process.storage.storeCalls === calls[index] ||
        process.storage.storesEnded < process.storage.storeCalls);
    while (active.some(storing)) {
      if (Date.now() > deadline) break;
      await sleep(1);
    }
    await world.settle();
  }
  toString() {
    return "checkpoint(every active process)";
  }
}

export class StepClock extends WorldCommand {
  constructor(readonly milliseconds: number) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.clock.step(this.milliseconds);
    await world.settle();
  }
  toString() {
    return `step-wall-clock(${this.milliseconds > 0 ? "+" : ""}${this.milliseconds} ms)`;
  }
}

export class FailNextCommit extends WorldCommand {
  constructor(readonly fault: "transient" | "after-applied") {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    world.target.injectCommitFault?.(this.fault);
    await world.settle();
  }
  toString() {
    return `fail-next-commit(${this.fault})`;
  }
}

export class Renotify extends WorldCommand {
  constructor(
    readonly slot: number,
    readonly kind: "complete" | "aborted",
    readonly pick: number,
  ) {
    super();
  }
  async run(_: ExploreModel, world: ExploredWorld) {
    const process = world.newestOf(this.slot);
    if (process === undefined || !process.isActive || world.target.renotify === undefined) return;
    let ids: number[];
    if (this.kind === "aborted") {
      ids = world.target.abortedIds?.(process.host) ?? [];
    } else {
      // Only checkpoints that are durable may be notified complete: the runtime never does otherwise.
      const scope =
        process.options.subtaskIndex === undefined
          ? "all"
          : `subtask-${process.options.subtaskIndex}-of-${process.options.parallelism}`;
      ids = (await world.storage.list(world.jobId))
        .filter((each) => each.scope === scope)
        .map((each) => each.checkpointId);
    }
    const id = ids[this.pick % Math.max(1, ids.length)];
    if (id === undefined) return;
    await world.target.renotify(process.host, this.kind, id).catch(() => undefined);
    await world.settle();
  }
  toString() {
    return `notify-${this.kind}-again(slot ${this.slot}, pick ${this.pick})`;
  }
}

const slot = fc.nat({ max: 3 });

/**
 * The operations of an exploration, weighted so that records, checkpoints and starts are common and
 * faults are sprinkled in.
 *
 * @example
 * ```ts
 * fc.commands(exploreCommands({ splits: 4 }), { maxCommands: 30 });
 * ```
 */
export function exploreCommands(options: {
  splits: number;
  faultyCommits: boolean;
  /** Fresh starts and storage resets too (the output starts over): for systems that tell who wrote what. */
  freshStarts?: boolean;
  /** Records racing checkpoints (see {@link ArriveDuringCheckpoint}), for the keyed job's exchange. */
  racingBarriers?: boolean;
}): fc.Arbitrary<ExploreCommand>[] {
  const arrive = fc
    .tuple(fc.nat({ max: options.splits - 1 }), fc.integer({ min: 1, max: 4 }))
    .map(([split, count]) => new Arrive(split, count));
  const arriveEverywhere = fc.integer({ min: 1, max: 3 }).map((count) => new ArriveEverywhere(count));
  const start = slot.map((each) => new StartProcess(each));
  const redeployed: Redeploy["restore"][] = options.freshStarts
    ? ["newest-by-id", "newest-by-id", "none", "reset-storage"]
    : ["newest-by-id"];
  const redeploy = fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom(...redeployed), fc.nat({ max: 3 }))
    .map(([parallelism, restore, startNow]) => new Redeploy(parallelism, restore, startNow));
  const checkpoint = fc
    .tuple(
      slot,
      fc.constantFrom("land", "land", "fail", "hold", "late") as fc.Arbitrary<
        "land" | "fail" | "hold" | "late"
      >,
    )
    .map(([each, outcome]) => new Checkpoint(each, outcome));
  const commands: fc.Arbitrary<ExploreCommand>[] = [
    arrive,
    arriveEverywhere,
    arriveEverywhere,
    start,
    start,
    checkpoint,
    checkpoint,
    checkpoint,
    fc
      .tuple(
        fc.nat({ max: 3 }),
        fc.constantFrom("land", "fail") as fc.Arbitrary<"land" | "fail">,
        fc.boolean(),
      )
      .map(([pick, outcome, late]) => new ReleaseHeldStore(pick, outcome, late)),
    slot.map((each) => new Kill(each)),
    slot.map((each) => new Freeze(each)),
    fc.nat({ max: 3 }).map((pick) => new Resume(pick)),
    fc
      .tuple(
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom("kill", "kill", "freeze") as fc.Arbitrary<"kill" | "freeze">,
        fc.nat({ max: 3 }),
      )
      .map(([parallelism, old, startNow]) => new Rescale(parallelism, old, startNow)),
    redeploy,
    fc.constant(new CheckpointEverywhere()),
    fc.constantFrom(-7_200_000, -3_600_000, -60_000, 60_000, 3_600_000).map((step) => new StepClock(step)),
    fc
      .tuple(
        slot,
        fc.constantFrom("complete", "aborted") as fc.Arbitrary<"complete" | "aborted">,
        fc.nat({ max: 5 }),
      )
      .map(([each, kind, pick]) => new Renotify(each, kind, pick)),
  ];
  if (options.racingBarriers) {
    const racing = fc
      .tuple(slot, fc.nat({ max: options.splits - 1 }), fc.integer({ min: 1, max: 6 }), fc.nat({ max: 2 }))
      .map(([each, split, count, after]) => new ArriveDuringCheckpoint(each, split, count, after));
    commands.push(racing, racing, racing);
  }
  if (options.faultyCommits) {
    commands.push(
      (fc.constantFrom("transient", "after-applied") as fc.Arbitrary<"transient" | "after-applied">).map(
        (fault) => new FailNextCommit(fault),
      ),
    );
  }
  return commands;
}
