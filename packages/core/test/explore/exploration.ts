import fc from "fast-check";
import { exploreCommands } from "./explore-commands.js";
import { ExploredWorld, type WorldSettings } from "./explored-world.js";
import type { SinkUnderTest } from "./sink-under-test.js";

/** How to run an exploration. */
export interface ExplorationOptions {
  /** The external system and sink under test, fresh for each case. */
  readonly target: () => SinkUnderTest | Promise<SinkUnderTest>;
  readonly runs: number;
  /** Replays a failure: the seed (and path) that fast-check printed. */
  readonly seed?: number;
  readonly path?: string;
  /** With `path`: the `replayPath` fast-check printed inside the command list. */
  readonly commandsPath?: string;
  readonly maxCommands?: number;
  /** Only for systems that can inject commit faults. */
  readonly faultyCommits?: boolean;
  /** Fresh starts and storage resets: only for systems that tell who wrote what (`visibleByWriter`). */
  readonly freshStarts?: boolean;
  /**
   * How the report says to replay a failure: the CLI (default), or a vitest file given the
   * EXPLORE_SEED, EXPLORE_PATH and EXPLORE_COMMANDS_PATH variables (see {@link explorationFromEnvironment}).
   */
  readonly replayFile?: string;
  /**
   * The keyed job (`keyBy` at parallelism 2 or 3 in one process, a running count and a window count
   * per key), its results checked against the reference computed from the input.
   */
  readonly keyed?: boolean;
  /** Stop exploring new cases after this long (shrinking still runs). */
  readonly timeLimitMs?: number;
}

/** What an exploration found. */
export interface ExplorationResult {
  readonly failed: boolean;
  readonly seed: number;
  readonly runs: number;
  /** The shrunk operation list, the problems, and the command that replays it. */
  readonly report: string;
}

const settingsArbitrary: fc.Arbitrary<WorldSettings> = fc.record({
  deployment: fc.constantFrom("per-subtask", "per-subtask", "per-subtask", "single") as fc.Arbitrary<
    WorldSettings["deployment"]
  >,
  parallelism: fc.integer({ min: 1, max: 3 }),
  splits: fc.constantFrom(4, 6),
  recordsPerSplit: fc.integer({ min: 6, max: 16 }),
  tolerableFailures: fc.constantFrom(0, 0, 1),
});

// The keyed job runs every subtask in one process (its exchange is in memory), from parallelism 2.
const keyedSettingsArbitrary: fc.Arbitrary<WorldSettings> = fc.record({
  deployment: fc.constant("single") as fc.Arbitrary<WorldSettings["deployment"]>,
  parallelism: fc.integer({ min: 2, max: 3 }),
  splits: fc.constantFrom(4, 6),
  recordsPerSplit: fc.integer({ min: 6, max: 16 }),
  tolerableFailures: fc.constantFrom(0, 0, 1),
  keyed: fc.constant(true),
});

/**
 * Explores interleavings of the checkpoint protocol over the real core: each case runs a random
 * operation list against an {@link ExploredWorld}, then the final phase, and fails when the visible
 * output is not the input exactly once or something stays open or prepared. fast-check shrinks a
 * failure to a short operation list; the report says how to replay it.
 *
 * @example
 * ```ts
 * const result = await explore({ target: inMemorySinkUnderTest, runs: 200 });
 * if (result.failed) console.error(result.report);
 * ```
 */
export async function explore(options: ExplorationOptions): Promise<ExplorationResult> {
  const seed = options.seed ?? Date.now() ^ (Math.random() * 0x1_0000_0000);
  const property = fc.asyncProperty(
    options.keyed ? keyedSettingsArbitrary : settingsArbitrary,
    fc.shuffledSubarray([0, 1, 2], { minLength: 0, maxLength: 3 }),
    fc.commands(
      exploreCommands({
        splits: 6,
        faultyCommits: options.faultyCommits ?? false,
        freshStarts: options.freshStarts ?? false,
        racingBarriers: options.keyed ?? false,
      }),
      {
        maxCommands: options.maxCommands ?? 30,
        size: "max",
        ...(options.commandsPath === undefined ? {} : { replayPath: options.commandsPath }),
      },
    ),
    fc.shuffledSubarray([0, 1, 2], { minLength: 3, maxLength: 3 }),
    fc.boolean(),
    async (settings, startOrder, commands, finalOrder, finalStaggered) => {
      const world = new ExploredWorld(settings, await options.target());
      try {
        // The first deployment starts in the given order (later ones start by command, one by one).
        for (const slot of startOrder) if (slot < world.slots) world.startProcess(slot);
        await fc.asyncModelRun(() => ({ model: {}, real: world }), commands);
        const verdict = await world.finish(finalOrder, finalStaggered);
        if (process.env.EXPLORE_DEBUG) {
          const stored = (await world.storage.list(world.jobId)).map(
            (each) => `${each.scope}#${each.checkpointId}`,
          );
          process.stderr.write(
            `${JSON.stringify(settings)} ${commands} | stored ${stored.join(" ")} | ${verdict.ok ? "ok" : verdict.problems[0]}\n`,
          );
        }
        if (!verdict.ok) throw new Error(verdict.problems.join("\n"));
      } finally {
        await world.dispose();
      }
    },
  );
  const details = await fc.check(property, {
    seed,
    numRuns: options.runs,
    ...(options.path === undefined ? {} : { path: options.path }),
    ...(options.timeLimitMs === undefined ? {} : { interruptAfterTimeLimit: options.timeLimitMs }),
    markInterruptAsFailure: false,
  });
  const commandsPath = /replayPath="([^"]*)"/.exec(String(details.counterexample?.[2] ?? ""))?.[1];
  const replay =
    options.replayFile === undefined
      ? [
          `npm run explore -- ${options.keyed ? "--keyed " : ""}--seed ${details.seed}`,
          details.counterexamplePath ? ` --path ${details.counterexamplePath}` : "",
          commandsPath ? ` --commands-path '${commandsPath}'` : "",
        ].join("")
      : [
          `EXPLORE_SEED=${details.seed}`,
          details.counterexamplePath ? ` EXPLORE_PATH=${details.counterexamplePath}` : "",
          commandsPath ? ` EXPLORE_COMMANDS_PATH='${commandsPath}'` : "",
          ` npx vitest run ${options.replayFile}`,
        ].join("");
  const report = details.failed
    ? `${fc.defaultReportMessage(details) ?? ""}\n\nWhat broke:\n${describeError(details.errorInstance)}\n\nreplay: ${replay}`
    : `${details.numRuns} case(s) passed (seed ${details.seed}${details.interrupted ? ", stopped at the time limit" : ""})`;
  return { failed: details.failed, seed: details.seed, runs: details.numRuns, report };
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The seed (default `fallbackSeed`) and replay paths of a vitest exploration, from EXPLORE_SEED,
 * EXPLORE_PATH and EXPLORE_COMMANDS_PATH, as a failure report prints them.
 *
 * @example
 * ```ts
 * await explore({ target, runs: 15, ...explorationFromEnvironment(20_261_130), replayFile: "test/explore/x.test.ts" });
 * ```
 */
export function explorationFromEnvironment(
  fallbackSeed: number,
): Pick<ExplorationOptions, "seed" | "path" | "commandsPath"> {
  const { EXPLORE_SEED, EXPLORE_PATH, EXPLORE_COMMANDS_PATH } = process.env;
  return {
    seed: EXPLORE_SEED === undefined ? fallbackSeed : Number(EXPLORE_SEED),
    ...(EXPLORE_PATH === undefined ? {} : { path: EXPLORE_PATH }),
    ...(EXPLORE_COMMANDS_PATH === undefined ? {} : { commandsPath: EXPLORE_COMMANDS_PATH }),
  };
}
