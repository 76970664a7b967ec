import {
  ArriveEverywhere,
  Checkpoint,
  CheckpointEverywhere,
  Kill,
  Redeploy,
  Rescale,
  StartProcess,
} from "./explore-commands.js";
import type { WorldSettings } from "./explored-world.js";
import type { Scenario } from "./named-scenarios.js";

const perSubtask = (parallelism: number): WorldSettings => ({
  deployment: "per-subtask",
  parallelism,
  splits: 6,
  recordsPerSplit: 10,
  tolerableFailures: 0,
});

/**
 * Fixed operation lists for invariant 10 — a restart never goes back behind the latest checkpoint of
 * the current lineage: `restore: "none"` and a named checkpoint start a lineage of their own and are
 * applied once, however the processes restart afterwards.
 *
 * @example
 * ```ts
 * for (const scenario of startRequestScenarios) expect((await runScenario(inMemorySinkUnderTest(), scenario)).problems).toEqual([]);
 * ```
 */
export const startRequestScenarios: readonly Scenario[] = [
  {
    name: 'restore "none" at a parallelism the job ran at before (3 → 2 → 3): an in-process restart restores nothing of the first deployment',
    settings: perSubtask(3),
    commands: [
      new StartProcess(0),
      new StartProcess(1),
      new StartProcess(2),
      new ArriveEverywhere(2),
      new CheckpointEverywhere(),
      new Rescale(2, "kill", 2),
      new ArriveEverywhere(2),
      new CheckpointEverywhere(),
      new Redeploy(3, "none", 3),
      new ArriveEverywhere(1),
      new Checkpoint(0, "land"),
      // Its store fails: the attempt restarts in-process, restoring "latest".
      new Checkpoint(2, "fail"),
      new ArriveEverywhere(1),
    ],
    finalOrder: [0, 1, 2],
  },
  {
    name: "a named checkpoint in the arguments: the pod restarted after later checkpoints goes on from the latest",
    settings: { ...perSubtask(1), deployment: "single" },
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new Redeploy(1, "newest-by-id", 1),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new Kill(0),
      new StartProcess(0),
      new ArriveEverywhere(1),
    ],
    finalOrder: [0],
  },
  {
    name: "a named checkpoint, one process per subtask: the sibling started after the first one checkpointed restores the same point",
    settings: perSubtask(2),
    commands: [
      new StartProcess(0),
      new StartProcess(1),
      new ArriveEverywhere(2),
      new CheckpointEverywhere(),
      new Redeploy(2, "newest-by-id", 1),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new StartProcess(1),
      new ArriveEverywhere(1),
      new Checkpoint(1, "fail"),
    ],
    finalOrder: [1, 0],
  },
  {
    name: "a fresh start none of whose processes ran, then the newest checkpoint named: the first run goes on, its input read once",
    settings: perSubtask(1),
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(3),
      new CheckpointEverywhere(),
      new ArriveEverywhere(7),
      new Redeploy(1, "none", 0),
      new Redeploy(1, "newest-by-id", 0),
    ],
    finalOrder: [0],
  },
  {
    name: "the checkpoint storage reset under a running job: the next deployment starts a new run",
    settings: perSubtask(2),
    commands: [
      new StartProcess(0),
      new StartProcess(1),
      new ArriveEverywhere(2),
      new CheckpointEverywhere(),
      new Redeploy(2, "reset-storage", 2),
      new ArriveEverywhere(1),
      new Checkpoint(1, "land"),
    ],
    finalOrder: [1, 0],
  },
];

/** True when a scenario starts over (a fresh start or a storage reset): only systems that tell who wrote what can check it. */
export function startsOver(scenario: Scenario): boolean {
  return scenario.commands.some(
    (command) => command instanceof Redeploy && command.restore !== "newest-by-id",
  );
}
