import {
  describeEnding,
  type ProcessEnding,
  type SubtaskLauncher,
  type SubtaskProcess,
  startSubtaskProcess,
} from "./subtask-process.js";

// The processes of a one-process-per-subtask deployment and what a supervisor (a StatefulSet) does
// with them: start them in an order, restart one that was killed or failed, stop them all. Zombies
// are processes frozen (SIGSTOP) and replaced, then resumed (SIGCONT): nobody stops them; how each
// one ended by itself is recorded. A SIGKILL here is chaos or clean-up, never a way to end a zombie
// that did not stop. A fault of a service (the broker killed, a network partition) may end a process
// too: while one is excused, its end is recorded as a fault ending and it is restarted, not counted
// as a crash.

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** A deadline raced against a process's end: it does not keep the harness alive once that came. */
const deadline = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** How a zombie ended: it must end by itself (`superseded` or `fenced`), never `survived`. */
export type ZombieOutcome = "superseded" | "fenced" | "failed" | "exited" | "survived";

/** A frozen-and-replaced process. */
export interface Zombie {
  readonly process: SubtaskProcess;
  thawedAt: number | undefined;
  outcome: ZombieOutcome | undefined;
  ending: string | undefined;
}

/** A process that ended without being told to (the supervisor started another). */
export interface Crash {
  readonly process: string;
  readonly ending: string;
  readonly errorCode: string | undefined;
}

export interface DeploymentOptions {
  /** The job's environment (everything but the subtask and parallelism). */
  readonly env: Readonly<Record<string, string>>;
  readonly log: (line: string) => void;
  /** How a subtask is started (default: a child process; the container chaos starts containers). */
  readonly launch?: SubtaskLauncher;
  /** Delay before a crashed process is started again (default 500 ms). */
  readonly crashRestartDelayMs?: number;
  /** Failures in a row of one subtask, never ready in between, that end the run (default 8). */
  readonly maxCrashesInARow?: number;
}

/** The run cannot go on: a subtask keeps failing (the job cannot restart from its checkpoint). */
export class DeploymentFailure extends Error {
  override readonly name = "DeploymentFailure";
}

function zombieOutcome(ending: ProcessEnding): ZombieOutcome {
  // SUPERSEDED may arrive wrapped (a job that gave up restarting says why in its message).
  if (ending.errorCode === "SUPERSEDED" || /SUPERSEDED|took this scope over/.test(ending.failure ?? ""))
    return "superseded";
  // So may TRANSACTION_FENCED: a Kafka sink's "took over its transactional id" is a fence.
  if (
    ending.errorCode === "TRANSACTION_FENCED" ||
    /fenced|took over its transactional id/i.test(ending.failure ?? "")
  )
    return "fenced";
  return ending.code === 0 ? "exited" : "failed";
}

/** The supervisor of one run's processes, across rescales. */
export class Deployment {
  readonly crashes: Crash[] = [];
  readonly zombies: Zombie[] = [];
  /** Things worth knowing that do not break exactly-once (a slow start, a stop that failed). */
  readonly notes: string[] = [];
  /** Processes that ended during a service fault (restarted; not crashes), by how they ended. */
  readonly faultEndings: string[] = [];
  /** Until when a process's end is put down to a fault: per subtask, or `-1` for every subtask. */
  private readonly excusedUntil = new Map<number, number>();
  private readonly current = new Map<number, SubtaskProcess>();
  /** Processes this supervisor signalled or gave up on: their end is no crash. */
  private readonly released = new Set<SubtaskProcess>();
  private readonly crashesInARow = new Map<number, number>();
  private failure: Error | undefined;
  private lateStoreCount = 0;
  private parallelismNow = 0;
  /** Set by `stopAll`: a start still under way launches no more processes. */
  private stopping = false;

  constructor(private readonly options: DeploymentOptions) {}

  /** The parallelism of the processes running now. */
  get parallelism(): number {
    return this.parallelismNow;
  }

  /** Processes that ended having held a store back past its timeout (`SLOW STORE` in their output). */
  get lateStores(): number {
    return this.lateStoreCount;
  }

  /** Throws the error that ends the run (a subtask that keeps failing), if there is one. */
  check(): void {
    if (this.failure) throw this.failure;
  }

  /** The end of each current process's output, to say why a run made no progress. */
  outputTails(characters = 1500): string {
    return [...this.current.values()]
      .map((process) => `--- ${process.name}\n${process.child.output().slice(-characters)}`)
      .join("\n");
  }

  /** Every process alive, current or zombie, for the clean-up. */
  alive(): SubtaskProcess[] {
    const zombies = this.zombies.map((zombie) => zombie.process);
    return [...this.current.values(), ...zombies].filter((process) => process.isAlive());
  }

  /**
   * Starts every subtask of `parallelism`: in `order`, either all at once with the given gaps, or
   * each once the one before is ready (a StatefulSet's ordered start; ready = first checkpoint).
   * A `stopAll` meanwhile ends it: no process is launched after that.
   */
  async start(
    parallelism: number,
    order: readonly number[],
    how: "random" | "ordered",
    gapsMs: readonly number[],
    readyTimeoutMs: number,
  ): Promise<void> {
    this.parallelismNow = parallelism;
    this.stopping = false;
    for (const [position, subtask] of order.entries()) {
      if (how === "random") await sleep(gapsMs[position] ?? 0);
      if (this.stopping) return;
      this.launch(subtask);
      if (how === "ordered") await this.awaitReady(subtask, readyTimeoutMs);
    }
  }

  /** SIGKILLs the current process of `subtask` and starts its replacement after `restartAfterMs`. */
  async kill(subtask: number, restartAfterMs: number): Promise<SubtaskProcess | undefined> {
    const victim = this.current.get(subtask);
    if (!victim) return undefined;
    this.released.add(victim);
    await victim.signal("SIGKILL");
    await victim.ended;
    await sleep(restartAfterMs);
    if (this.current.get(subtask) === victim) this.launch(subtask);
    return victim;
  }

  /** SIGSTOPs the current process of `subtask` and starts a replacement at once. */
  async freeze(subtask: number): Promise<Zombie | undefined> {
    const frozen = this.current.get(subtask);
    if (!frozen?.isAlive()) return undefined;
    this.released.add(frozen);
    await frozen.signal("SIGSTOP");
    const zombie: Zombie = { process: frozen, thawedAt: undefined, outcome: undefined, ending: undefined };
    this.zombies.push(zombie);
    void frozen.ended.then((ending) => {
      zombie.ending = describeEnding(ending);
      if (zombie.outcome !== undefined) return;
      zombie.outcome = zombieOutcome(ending);
      this.options.log(`    zombie ${frozen.name} ended by itself: ${zombie.ending}`);
    });
    this.launch(subtask);
    return zombie;
  }

  /** SIGCONTs a zombie: from now on it must end by itself. */
  async thaw(zombie: Zombie): Promise<void> {
    await zombie.process.signal("SIGCONT");
    zombie.thawedAt = Date.now();
  }

  /** The current process of `subtask`, if one runs. */
  running(subtask: number): SubtaskProcess | undefined {
    const process = this.current.get(subtask);
    return process?.isAlive() ? process : undefined;
  }

  /**
   * Puts the end of `subtask`'s processes (every subtask's with `"all"`) down to a fault until
   * `untilMs` (a time; it replaces an earlier one): such a process is restarted and recorded in
   * `faultEndings`, not `crashes`.
   */
  excuse(subtask: number | "all", untilMs: number): void {
    const key = subtask === "all" ? -1 : subtask;
    this.excusedUntil.set(key, untilMs);
  }

  /**
   * Waits until every thawed zombie ended, each at most `graceMs` after its SIGCONT. One that is
   * still running then is recorded as `survived` (a failure of the run) and only then killed, so
   * that the rest of the run can go on.
   */
  async awaitZombies(graceMs: number): Promise<void> {
    for (const zombie of this.zombies) {
      if (zombie.outcome !== undefined || zombie.thawedAt === undefined) continue;
      const left = zombie.thawedAt + graceMs - Date.now();
      const ended = await Promise.race([
        zombie.process.ended.then(() => true),
        deadline(Math.max(0, left)).then(() => false),
      ]);
      if (ended) continue;
      zombie.outcome = "survived";
      this.options.log(
        `    zombie ${zombie.process.name} still running ${graceMs} ms after SIGCONT; its output:\n${zombie.process.child.output().slice(-2000)}`,
      );
      await zombie.process.signal("SIGKILL");
      await zombie.process.ended;
    }
  }

  /** Stops every current process with `signal` (SIGTERM: a final checkpoint, exit 0 expected). */
  async stopAll(signal: "SIGTERM" | "SIGKILL", timeoutMs = 60_000): Promise<void> {
    this.stopping = true;
    const stopping = [...this.current.values()];
    this.current.clear();
    for (const process of stopping) this.released.add(process);
    // SIGTERM before the job installed its handlers would kill it outright: let it get ready first
    // (a process that never gets ready gets its SIGTERM after 15 s anyway).
    if (signal === "SIGTERM")
      await Promise.all(
        stopping.map((process) => Promise.race([process.ready, process.ended, deadline(15_000)])),
      );
    await Promise.all(stopping.map((process) => process.signal(signal)));
    await Promise.all(
      stopping.map(async (process) => {
        const ending = await Promise.race([process.ended, deadline(timeoutMs).then(() => undefined)]);
        if (ending === undefined) {
          this.notes.push(`${process.name} did not stop within ${timeoutMs} ms of ${signal}`);
          this.options.log(
            `    ${process.name} did not stop within ${timeoutMs} ms of ${signal}; its output:\n${process.child.output().slice(-3000)}`,
          );
          await process.signal("SIGKILL");
          await process.ended;
        } else if (signal === "SIGTERM" && ending.code !== 0) {
          this.notes.push(`${process.name} stopped with ${describeEnding(ending)} on SIGTERM`);
        }
      }),
    );
  }

  private launch(subtask: number): SubtaskProcess {
    const process = (this.options.launch ?? startSubtaskProcess)(
      this.options.env,
      subtask,
      this.parallelismNow,
    );
    this.current.set(subtask, process);
    void process.ready.then(() => this.crashesInARow.set(subtask, 0));
    void process.ended.then((ending) => {
      if (process.child.output().includes("SLOW STORE")) this.lateStoreCount += 1;
      this.onEnded(process, ending);
    });
    return process;
  }

  private onEnded(process: SubtaskProcess, ending: ProcessEnding): void {
    if (this.released.has(process) || this.current.get(process.subtask) !== process) return;
    const description = describeEnding(ending);
    const excused = Math.max(this.excusedUntil.get(process.subtask) ?? 0, this.excusedUntil.get(-1) ?? 0);
    if (Date.now() <= excused) {
      this.faultEndings.push(description);
      this.options.log(`    ${process.name} ended during a fault: ${description}; restarting it`);
      setTimeout(() => {
        if (this.current.get(process.subtask) === process) this.launch(process.subtask);
      }, this.options.crashRestartDelayMs ?? 500);
      return;
    }
    this.crashes.push({ process: process.name, ending: description, errorCode: ending.errorCode });
    this.options.log(`    ${process.name} failed: ${description}`);
    const inARow = (this.crashesInARow.get(process.subtask) ?? 0) + 1;
    this.crashesInARow.set(process.subtask, inARow);
    if (inARow >= (this.options.maxCrashesInARow ?? 8)) {
      this.failure ??= new DeploymentFailure(
        `${process.name} failed ${inARow} times in a row without becoming ready; last: ${description}\n${process.child.output().slice(-3000)}`,
      );
      return;
    }
    setTimeout(() => {
      if (this.current.get(process.subtask) === process) this.launch(process.subtask);
    }, this.options.crashRestartDelayMs ?? 500);
  }

  /** Waits until the current process of `subtask` is ready; false after `timeoutMs`. */
  async untilReady(subtask: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.current.get(subtask)?.isReady()) {
      if (this.stopping) return false;
      this.check();
      if (Date.now() > deadline) return false;
      await sleep(100);
    }
    return true;
  }

  private async awaitReady(subtask: number, timeoutMs: number): Promise<void> {
    if (!(await this.untilReady(subtask, timeoutMs)) && !this.stopping)
      this.notes.push(`subtask ${subtask}/${this.parallelismNow} not ready within ${timeoutMs} ms`);
  }
}
