import {
  Arrive,
  ArriveEverywhere,
  Checkpoint,
  Kill,
  ReleaseHeldStore,
  Rescale,
  StartProcess,
  StepClock,
  type WorldCommand,
} from "./explore-commands.js";
import { ExploredWorld, type Verdict, type WorldSettings } from "./explored-world.js";
import type { SinkUnderTest } from "./sink-under-test.js";

/** A fixed operation list of the exploration: the shortest known way to one silent break of exactly-once. */
export interface Scenario {
  readonly name: string;
  readonly settings: WorldSettings;
  /** Processes started before the first command without waiting for them (as the exploration's first deployment). */
  readonly startOrder?: readonly number[];
  readonly commands: readonly WorldCommand[];
  /** Start order of the fresh deployment in the final phase. */
  readonly finalOrder: readonly number[];
}

const perSubtask = (parallelism: number): WorldSettings => ({
  deployment: "per-subtask",
  parallelism,
  splits: 6,
  recordsPerSplit: 10,
  tolerableFailures: 0,
});
const single: WorldSettings = { ...perSubtask(1), deployment: "single" };

/**
 * The silent breaks that the restore rule and the late-store fence prevent, as operation lists (each
 * broke exactly-once without them): the multi-process rescale with a staggered start, the rescale
 * back to an earlier parallelism, the wall clock stepped back ("latest" goes by id) and the store
 * that lands after its timeout, after a restart or within the same attempt.
 *
 * @example
 * ```ts
 * for (const scenario of namedScenarios) expect((await runScenario(target, scenario)).problems).toEqual([]);
 * ```
 */
export const namedScenarios: readonly Scenario[] = [
  {
    name: "one process per subtask, 2 → 3, process 0 checkpoints before 1 and 2 start",
    settings: perSubtask(2),
    commands: [
      new StartProcess(0),
      new StartProcess(1),
      new ArriveEverywhere(3),
      new Checkpoint(0, "land"),
      new Checkpoint(1, "land"),
      new Rescale(3, "kill"),
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
    ],
    finalOrder: [1, 2, 0],
  },
  {
    name: "one process per subtask, 2 → 3 → 2, process 1 of the second 2 starts after process 0 checkpointed",
    settings: perSubtask(2),
    commands: [
      new StartProcess(0),
      new StartProcess(1),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new Checkpoint(1, "land"),
      new Rescale(3, "kill"),
      new StartProcess(0),
      new StartProcess(1),
      new StartProcess(2),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new Checkpoint(1, "land"),
      new Checkpoint(2, "land"),
      new Rescale(2, "kill"),
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
    ],
    finalOrder: [1, 0],
  },
  {
    name: "the wall clock steps back an hour between checkpoints",
    settings: single,
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new StepClock(-3_600_000),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new Kill(0),
      new StartProcess(0),
      new Arrive(0, 1),
    ],
    finalOrder: [0],
  },
  {
    name: "a checkpoint whose store timed out lands after the next attempt restored the one before",
    settings: single,
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new ArriveEverywhere(2),
      new Checkpoint(0, "hold"),
      new ReleaseHeldStore(0, "land", true),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
    ],
    finalOrder: [0],
  },
  {
    name: "a checkpoint whose store timed out lands later while the attempt goes on (one failure tolerated)",
    settings: { ...single, tolerableFailures: 1 },
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new ArriveEverywhere(2),
      new Checkpoint(0, "hold"),
      new ReleaseHeldStore(0, "land", true),
      new ArriveEverywhere(2),
      new Checkpoint(0, "fail"),
      new ArriveEverywhere(2),
    ],
    finalOrder: [0],
  },
];

/**
 * Runs one {@link Scenario} against a fresh world and returns the final phase's verdict.
 *
 * @example
 * ```ts
 * const verdict = await runScenario(inMemorySinkUnderTest(), namedScenarios[0]!);
 * ```
 */
export async function runScenario(target: SinkUnderTest, scenario: Scenario): Promise<Verdict> {
  const world = new ExploredWorld(scenario.settings, target);
  try {
    for (const slot of scenario.startOrder ?? []) world.startProcess(slot);
    for (const command of scenario.commands) await command.run({}, world);
    return await world.finish(scenario.finalOrder);
  } finally {
    await world.dispose();
  }
}
