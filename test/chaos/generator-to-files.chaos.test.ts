import { describe, expect, it } from "vitest";
import { runGeneratorToFilesChaos, runSeededChaos } from "./chaos-runner.js";

// The short CI configuration of the generator → files chaos run (the long one: `npm run chaos`).
// The seed is printed; ONCEFLOW_CHAOS_SEED=<seed> replays its kill schedule.

describe("chaos: generator → files under repeated SIGKILL", () => {
  it("commits every input exactly once, in order per key, after 20 random kills", {
    timeout: 150_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) =>
      runGeneratorToFilesChaos({
        seed,
        kills: 20,
        records: 8000,
        recordsPerSecond: 1000,
        maxKillDelayMs: 700,
        log,
      }),
    );
    expect(report.kills).toBe(20);
    expect(report.committed).toBe(8000);
  });
});
