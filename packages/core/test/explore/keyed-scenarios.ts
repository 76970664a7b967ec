import {
  Arrive,
  ArriveDuringCheckpoint,
  ArriveEverywhere,
  Checkpoint,
  Freeze,
  Kill,
  ReleaseHeldStore,
  Rescale,
  Resume,
  StartProcess,
} from "./explore-commands.js";
import type { WorldSettings } from "./explored-world.js";
import type { Scenario } from "./named-scenarios.js";

const keyedInOneProcess = (parallelism: number): WorldSettings => ({
  deployment: "single",
  parallelism,
  splits: 6,
  recordsPerSplit: 10,
  tolerableFailures: 0,
  keyed: true,
});

/**
 * Fixed operation lists of the keyed job (`keyed-job.ts`): `keyBy` at parallelism ≥ 2 in one
 * process, every split carrying every key, so each keyed subtask gets records from every sending
 * subtask through the exchange. Records race checkpoints (barriers), the process is killed, frozen
 * (a zombie), its store held past the timeout, and the job rescaled 2 → 3 → 1; the final phase
 * checks the running count per key and the count per (key, window) against the reference computed
 * from the input. Each fails with barrier alignment switched off (`plantUnalignedSnapshots`).
 *
 * @example
 * ```ts
 * for (const scenario of keyedScenarios) expect((await runScenario(target, scenario)).problems).toEqual([]);
 * ```
 */
export const keyedScenarios: readonly Scenario[] = [
  {
    name: "keyBy at parallelism 2 in one process: records race two checkpoints, then a kill and a restart",
    settings: keyedInOneProcess(2),
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new Checkpoint(0, "land"),
      new ArriveDuringCheckpoint(0, 1, 4, 0),
      new ArriveDuringCheckpoint(0, 0, 4, 1),
      new ArriveDuringCheckpoint(0, 3, 3, 2),
      new Kill(0),
      new StartProcess(0),
      new ArriveEverywhere(2),
    ],
    finalOrder: [0],
  },
  {
    name: "keyBy rescaled 2 → 3 → 1 in one process, with a zombie and a store that lands after its timeout",
    settings: keyedInOneProcess(2),
    commands: [
      new StartProcess(0),
      new ArriveEverywhere(2),
      new ArriveDuringCheckpoint(0, 2, 4, 0),
      new Rescale(3, "freeze", 1),
      new ArriveDuringCheckpoint(0, 5, 4, 0),
      new ArriveEverywhere(1),
      new Checkpoint(0, "late"),
      new Resume(0),
      new ArriveDuringCheckpoint(0, 4, 3, 1),
      new Rescale(1, "kill", 1),
      new Arrive(1, 2),
      new Checkpoint(0, "hold"),
      new ReleaseHeldStore(0, "land", false),
      new Freeze(0),
      new StartProcess(0),
      new ArriveEverywhere(1),
    ],
    finalOrder: [0],
  },
];
