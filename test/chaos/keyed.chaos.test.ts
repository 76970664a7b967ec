import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { sharedKafkaBrokers as kafkaBrokers, sharedPostgresUrl as postgresUrl } from "./kafka-services.js";
import { KEYED_CHAOS_SHAPES, type KeyedChaosShapeName, runKeyedChaos } from "./keyed-chaos-runner.js";

// The short CI configuration of the keyed chaos: Kafka → keyBy → tumbling window count → Kafka or
// PostgreSQL, rescaled 2 → 3 → 1 across random SIGKILLs and kills at each sink phase, in every shape
// the keyed chaos knows (the long run: `npm run chaos -- --pipeline keyed-to-kafka|keyed-to-postgres`).
// One process per subtask (the keyBy through a Kafka repartition topic) runs one sink per run,
// chosen by the seed, to stay within a few minutes. ONCEFLOW_CHAOS_SEED=<seed> replays a kill schedule.

// One process per subtask has its own, shorter case below.
const cases = (Object.keys(KEYED_CHAOS_SHAPES) as KeyedChaosShapeName[])
  .filter((shape) => shape !== "per-subtask")
  .flatMap((shape) => (["kafka", "postgres"] as const).map((sink) => ({ shape, sink })));

describe.each(cases)(
  "chaos: keyed window count → $sink, $shape, under repeated SIGKILL",
  ({ shape, sink }) => {
    it("commits every (key, window) once with the count computed from the input, after 15 kills", {
      timeout: 240_000,
    }, async () => {
      const report = await runSeededChaos((seed, log) =>
        runKeyedChaos({
          shape,
          sink,
          ...(sink === "postgres" ? { postgresUrl: postgresUrl() } : {}),
          seed,
          kills: 15,
          records: 4500,
          recordsPerSecond: 150,
          // Every third kill at a sink phase: each of the five phases once.
          phaseKillEvery: 3,
          minKillDelayMs: 400,
          maxKillDelayMs: 2600,
          brokers: kafkaBrokers(),
          log,
        }),
      );
      expect(report.violations).toEqual([]);
      expect(report.kills).toBe(15);
      expect(report.parallelisms).toEqual([2, 3, 1]);
      expect(report.rows).toBe(report.windows);
    });
  },
);

describe("chaos: keyed window count, one process per subtask, keyBy through a Kafka repartition topic", () => {
  it("commits every (key, window) once with the count computed from the input, after 12 SIGKILLs and the zombies the seed draws", {
    timeout: 240_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) => {
      const sink = seed % 2 === 0 ? "kafka" : "postgres";
      return runKeyedChaos({
        shape: "per-subtask",
        sink,
        ...(sink === "postgres" ? { postgresUrl: postgresUrl() } : {}),
        seed,
        // Processes SIGKILLed: single ones, and every process of an attempt at once.
        kills: 12,
        // About a minute of input: the attempts of two or three processes take 10–20 s each.
        records: 4500,
        recordsPerSecond: 80,
        // Every third attempt killed at a sink phase.
        phaseKillEvery: 3,
        minKillDelayMs: 400,
        maxKillDelayMs: 2000,
        brokers: kafkaBrokers(),
        log,
      });
    });
    expect(report.violations).toEqual([]);
    expect(report.kills).toBeGreaterThanOrEqual(12);
    expect(report.parallelisms).toEqual([2, 3, 1]);
    expect(report.rows).toBe(report.windows);
  });
});
