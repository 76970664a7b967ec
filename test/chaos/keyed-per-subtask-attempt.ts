import { Deployment, DeploymentFailure, type ZombieOutcome } from "./deployment.js";
import { shuffled } from "./per-subtask-schedule.js";
import type { SubtaskLauncher, SubtaskProcess } from "./subtask-process.js";

// One attempt of the keyed chaos with one process per subtask (the `per-subtask` shape of
// keyed-chaos-runner.ts): `parallelism` processes of the keyed job, each running one subtask, the
// keyBy crossing them through the Kafka repartition topic. They start in a seeded order — all at
// once with gaps, or each once the one before stored its first checkpoint (a StatefulSet's ordered
// start). Before the runner kills the attempt as a whole, `disturb` may SIGKILL single processes
// (a supervisor restarts each after a while) and freeze one (SIGSTOP, a replacement started, SIGCONT
// later: a zombie, which must end by itself, superseded or fenced). A process that fails by itself
// is restarted too and reported as a finding; one that keeps failing ends the attempt.

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long a thawed zombie has to end by itself. */
const ZOMBIE_GRACE_MS = 20_000;

/** What the runner sees of an attempt (see `KeyedChaosAttempt` in keyed-chaos-runner.ts). */
export interface PerSubtaskAttempt {
  readonly started: Promise<void>;
  isStarted(): boolean;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(signal: "SIGKILL" | "SIGTERM"): void;
  isAlive(): boolean;
  output(): string;
  aliveProcesses(): number;
  disturb(): Promise<{ kills: number; zombies: number }>;
  findings(): readonly string[];
}

/** Faults of single processes an attempt draws: kills and zombies, before the kill of all. */
export interface PerSubtaskDisturbance {
  /** Most single-process faults per attempt (default 3; each attempt draws 0 … this many). */
  readonly maxEvents?: number;
  /** The chance that a fault is a zombie rather than a SIGKILL (default 1/6). */
  readonly zombieChance?: number;
  /** Longest wait before a fault, ms (default 2000). */
  readonly maxGapMs?: number;
}

function zombieFinding(name: string, outcome: ZombieOutcome | undefined, ending: string | undefined) {
  if (outcome === "survived") return `zombie ${name} did not end by itself after SIGCONT`;
  // It must stop because it was superseded or fenced, not because something else broke.
  if (outcome === "failed" || outcome === "exited")
    return `zombie ${name} ended neither superseded nor fenced: ${ending ?? ""}`;
  return undefined;
}

/**
 * Starts `parallelism` processes of the job `launch` starts, in an order `random` draws, and
 * returns the attempt (see the file's header).
 */
export function startPerSubtaskAttempt(
  launch: SubtaskLauncher,
  env: Readonly<Record<string, string>>,
  parallelism: number,
  random: () => number,
  log: (line: string) => void,
  disturbance: PerSubtaskDisturbance = {},
): PerSubtaskAttempt {
  const launched: SubtaskProcess[] = [];
  const deployment = new Deployment({
    env,
    log,
    launch: (processEnv, subtask, processParallelism) => {
      const process = launch(processEnv, subtask, processParallelism);
      launched.push(process);
      return process;
    },
  });
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low));
  const subtasks = Array.from({ length: parallelism }, (_, subtask) => subtask);
  const how = random() < 0.5 ? "random" : "ordered";
  const order = how === "ordered" ? subtasks : shuffled(subtasks, random);
  const gaps = subtasks.map(() => between(0, 800));
  log(
    `    ${parallelism === 1 ? "1 process" : `${parallelism} processes`}, ${how} start [${order.join(" ")}]`,
  );
  let isStarted = false;
  let ended = false;
  let failure: string | undefined;
  const starting = deployment.start(parallelism, order, how, gaps, 60_000);
  // STARTED once every subtask has a process that printed it, after the start (the ordered start
  // waits for each to be ready first): a process killed before it printed STARTED has a
  // replacement that does.
  const everySubtaskStarted = () =>
    subtasks.every((subtask) =>
      launched.some((process) => process.subtask === subtask && process.child.isStarted()),
    );
  const started = starting.then(async () => {
    while (!everySubtaskStarted()) {
      if (ended) return new Promise<void>(() => {});
      await sleep(50);
    }
    isStarted = true;
  });
  started.catch(() => undefined);
  let stopWith: ((signal: "SIGKILL" | "SIGTERM") => void) | undefined;
  const stopRequested = new Promise<"SIGKILL" | "SIGTERM">((resolve) => {
    stopWith = resolve;
  });
  // The attempt ends when the runner stops it, or when a subtask keeps failing (the deployment
  // gives up on it): then, as a process that ends on its own, with code 1.
  const failed = (async () => {
    while (!ended) {
      try {
        deployment.check();
      } catch (error) {
        failure = error instanceof Error ? error.message : String(error);
        return;
      }
      await sleep(250);
    }
  })();
  const exited = Promise.race([stopRequested, failed.then(() => undefined)]).then(async (signal) => {
    // A start still under way (an ordered one waiting for a process held at a sink phase, say)
    // launches nothing after the stop.
    const notesBefore = deployment.notes.length;
    await deployment.stopAll(signal ?? "SIGKILL");
    await starting.catch(() => undefined);
    for (const process of deployment.alive()) {
      await process.signal("SIGKILL");
      await process.ended;
    }
    ended = true;
    if (signal === "SIGKILL") return { code: null, signal: "SIGKILL" as const };
    if (signal === "SIGTERM") return { code: deployment.notes.length === notesBefore ? 0 : 1, signal: null };
    return { code: 1, signal: null };
  });
  return {
    started,
    isStarted: () => isStarted,
    exited,
    signal: (signal) => stopWith?.(signal),
    isAlive: () => !ended,
    output: () =>
      [
        ...(failure === undefined ? [] : [`--- the deployment gave up: ${failure}`]),
        ...deployment.notes.map((note) => `--- ${note}`),
        ...launched.map((process) => `--- ${process.name}\n${process.child.output()}`),
      ].join("\n"),
    aliveProcesses: () => deployment.alive().length,
    async disturb() {
      const events = Math.floor(random() * ((disturbance.maxEvents ?? 3) + 1));
      let kills = 0;
      let zombies = 0;
      try {
        await starting;
        for (let event = 0; event < events && !ended; event++) {
          const subtask = Math.floor(random() * parallelism);
          const zombie = random() < (disturbance.zombieChance ?? 1 / 6);
          // Four kills in five and every freeze hit a process that is ready (it has checkpointed).
          const afterReady = zombie || random() < 0.8;
          const afterMs = between(0, disturbance.maxGapMs ?? 2000);
          if (afterReady) await deployment.untilReady(subtask, 30_000);
          await sleep(afterMs);
          if (ended) break;
          if (zombie) {
            const frozen = await deployment.freeze(subtask);
            if (!frozen) continue;
            zombies++;
            const frozenMs = between(1000, 4000);
            const untilReady = random() < 0.5;
            log(
              `    SIGSTOP ${frozen.process.name}, replacement started; SIGCONT ${frozenMs} ms after ${untilReady ? "the replacement is ready" : "that"}`,
            );
            if (untilReady) await deployment.untilReady(subtask, 30_000);
            await sleep(frozenMs);
            await deployment.thaw(frozen);
          } else {
            const victim = await deployment.kill(subtask, between(0, 500));
            if (victim === undefined) continue;
            kills++;
            log(`    SIGKILL ${victim.name}${victim.isReady() ? "" : " (before ready)"}`);
          }
        }
        await deployment.awaitZombies(ZOMBIE_GRACE_MS);
      } catch (error) {
        // The deployment gave up on a subtask: `exited` says so.
        if (!(error instanceof DeploymentFailure)) throw error;
      }
      return { kills, zombies };
    },
    findings: () => [
      ...deployment.crashes.map((crash) => `${crash.process} failed by itself: ${crash.ending}`),
      ...deployment.zombies.flatMap(
        (zombie) => zombieFinding(zombie.process.name, zombie.outcome, zombie.ending) ?? [],
      ),
    ],
  };
}
