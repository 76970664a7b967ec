import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { sharedKafkaBrokers as kafkaBrokers, sharedPostgresUrl as postgresUrl } from "./kafka-services.js";
import { runPerSubtaskChaos } from "./per-subtask-chaos-runner.js";

// The short CI configuration of the one-process-per-subtask chaos (the long one:
// `npm run chaos -- --topology per-subtask --pipeline … --storage … --kills 200`): parallelism
// 2 → 3 → 2 with SIGKILLs, a zombie and a late checkpoint store, against the shared broker and
// PostgreSQL. To stay within a few minutes on a loaded machine one run covers one combination of
// sink and checkpoint storage, chosen by the seed like the start orders, stops and moments;
// ONCEFLOW_CHAOS_SEED=<seed> replays a run (its combination included).

const combinations = [
  { sink: "postgres", storage: "postgres" },
  { sink: "kafka", storage: "filesystem" },
  { sink: "kafka", storage: "postgres" },
  { sink: "postgres", storage: "filesystem" },
] as const;

describe("chaos, one process per subtask", () => {
  it("commits every input exactly once across a rescale 2 → 3 → 2, kills and a zombie; the zombie ends by itself", {
    timeout: 240_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) => {
      const { sink, storage } = combinations[seed % combinations.length] ?? combinations[0];
      return runPerSubtaskChaos({
        sink,
        storage,
        seed,
        kills: 3,
        zombies: 1,
        records: 2000,
        recordsPerSecond: 150,
        parallelisms: [2, 3, 2],
        maxEventGapMs: 1500,
        maxFrozenMs: 3000,
        zombieGraceMs: 15_000,
        catchUpTimeoutMs: 60_000,
        brokers: kafkaBrokers(),
        postgresUrl: postgresUrl(),
        log,
      });
    });
    expect(report.violations).toEqual([]);
    expect(report.distinct).toBe(2000);
    expect(report.committed).toBe(2000);
    expect(report.preparedLeft).toEqual([]);
    expect(report.zombies.survived ?? 0).toBe(0);
  });
});
