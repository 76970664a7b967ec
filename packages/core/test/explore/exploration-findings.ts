import {
  Arrive,
  ArriveEverywhere,
  Checkpoint,
  CheckpointEverywhere,
  Freeze,
  Rescale,
  Resume,
  StartProcess,
} from "./explore-commands.js";
import type { Scenario } from "./named-scenarios.js";

/**
 * What the exploration found beyond the named scenarios, shrunk to fixed operation lists; each failed before its
 * fix and must hold now (CI runs them, and `npm run explore -- --scenarios`). A new finding goes
 * here with its fix.
 *
 * @example
 * ```ts
 * for (const scenario of explorationFindings) console.log((await runScenario(inMemorySinkUnderTest(), scenario)).problems);
 * ```
 */
export const explorationFindings: readonly Scenario[] = [
  {
    name: "a frozen process resumes after its replacement started: its failed checkpoint's transaction stays prepared (invariant 6)",
    settings: {
      deployment: "per-subtask",
      parallelism: 1,
      splits: 4,
      recordsPerSplit: 6,
      tolerableFailures: 0,
    },
    // Frozen while it starts, as the exploration found it; its next store is refused (SUPERSEDED).
    startOrder: [0],
    commands: [
      new Freeze(0),
      new Checkpoint(0, "fail"),
      new StartProcess(0),
      new Resume(0),
      new CheckpointEverywhere(),
    ],
    finalOrder: [0],
  },
  {
    name: "rescaled before any checkpoint while the old process is frozen: both deployments read and commit the same splits (invariants 3, 4)",
    settings: {
      deployment: "per-subtask",
      parallelism: 1,
      splits: 4,
      recordsPerSplit: 6,
      tolerableFailures: 0,
    },
    // Frozen while it starts (before it claimed its scope), as the exploration found it.
    startOrder: [0],
    commands: [new Rescale(2, "freeze", 1), new Resume(0), new Arrive(0, 1), new CheckpointEverywhere()],
    finalOrder: [1, 0],
  },
  {
    name: "a process frozen during its restore resumes after a rescale: it stores a base checkpoint of a new lineage that the next start restores, replaying committed records (invariants 3, 4)",
    settings: {
      deployment: "single",
      parallelism: 2,
      splits: 4,
      recordsPerSplit: 6,
      tolerableFailures: 0,
    },
    // Frozen after its claim, before it planned its restore; the replacement and then a rescale to 1
    // claim the same scope ("all") before it resumes. Its base store is now fenced (SUPERSEDED).
    startOrder: [0],
    commands: [
      new Freeze(0),
      new StartProcess(0),
      new CheckpointEverywhere(),
      new ArriveEverywhere(1),
      new Rescale(1, "kill", 1),
      new Resume(0),
      new Checkpoint(0, "land"),
    ],
    finalOrder: [2, 0, 1],
  },
  {
    name: "a process frozen after its claim restores the checkpoint its replacement stored, and aborts the replacement's open transaction while it is still written (invariants 1, 4)",
    settings: {
      deployment: "per-subtask",
      parallelism: 2,
      splits: 4,
      recordsPerSplit: 6,
      tolerableFailures: 0,
    },
    // Frozen after its claim, before it planned its restore, by the "rescale" to the same shape; it
    // resumes after the replacement (a newer incarnation of its scope) stored checkpoint 1. Its
    // restore is now refused (SUPERSEDED) before any sink recovery runs.
    startOrder: [0],
    commands: [
      new Rescale(2, "freeze", 1),
      new Checkpoint(0, "land"),
      new ArriveEverywhere(1),
      new Checkpoint(0, "hold"),
      new Resume(0),
      new Checkpoint(0, "land"),
      new ArriveEverywhere(2),
      new ArriveEverywhere(3),
      new Checkpoint(0, "land"),
      new StartProcess(0),
    ],
    finalOrder: [1, 0, 2],
  },
];
