import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { Job } from "../runtime/job.js";
import { GeneratorSource } from "../source/generator-source.js";
import { DEFAULT_INITIAL_DELAY_MS, defaultInitialDelay } from "./checkpointing-options.js";

const HOUR = 3_600_000;

function unboundedJob(
  jobId: string,
  checkpointing: { interval: number; initialDelay?: number },
  failAt?: number,
) {
  let failed = false;
  const job = new Job({
    jobId,
    checkpointing: { ...checkpointing, storage: "memory" },
    restartStrategy: { type: "fixed-delay", attempts: 1, delay: 10 },
  });
  job
    .fromSource(new GeneratorSource({ generate: (index) => index, recordsPerSecond: 2000 }), { uid: "in" })
    .map((value) => {
      if (value === failAt && !failed) {
        failed = true;
        throw new Error(`boom at ${value}`);
      }
      return value;
    })
    .sinkTo({ write: () => {} }, { uid: "out" });
  return job;
}

async function until(condition: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return true;
}

describe("checkpointing.initialDelay", () => {
  it("defaults to min(interval, 200)", () => {
    expect(DEFAULT_INITIAL_DELAY_MS).toBe(200);
    expect(defaultInitialDelay(1000)).toBe(200);
    expect(defaultInitialDelay(50)).toBe(50);
  });

  it("is validated: a negative or non-finite delay is a ConfigurationError naming the setting", () => {
    for (const initialDelay of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      let caught: unknown;
      try {
        new Job({ jobId: "j", checkpointing: { interval: 1000, initialDelay } });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ConfigurationError);
      expect(caught).toMatchObject({ code: "CONFIGURATION" });
      expect(String((caught as Error).message)).toMatch(/checkpointing\.initialDelay/);
    }
    expect(() => new Job({ jobId: "j", checkpointing: { interval: 1000, initialDelay: 0 } })).not.toThrow();
  });

  it("takes the first checkpoint of an attempt after the default delay, not after the interval", async () => {
    const job = unboundedJob("initial-default", { interval: HOUR });
    const running = job.execute();
    await until(() => job.status().state === "running", 5000);
    const runningAt = Date.now();
    // With an hour's interval, only the initial delay can bring a checkpoint this soon.
    expect(await until(() => job.status().lastCompletedCheckpoint !== undefined, 5000)).toBe(true);
    expect(Date.now() - runningAt).toBeGreaterThanOrEqual(DEFAULT_INITIAL_DELAY_MS - 50);
    job.stop();
    await running;
  });

  it("takes the first checkpoint after a restart after the initial delay too", async () => {
    // Fails at record 50 (25 ms in), before the first attempt's checkpoint; the restart then runs.
    const job = unboundedJob("initial-restart", { interval: HOUR, initialDelay: 100 }, 50);
    const running = job.execute();
    expect(await until(() => job.status().attempt === 1 && job.status().state === "running", 5000)).toBe(
      true,
    );
    expect(await until(() => job.status().lastCompletedCheckpoint !== undefined, 5000)).toBe(true);
    job.stop();
    await running;
  });

  it("set to the interval, waits one interval for the first checkpoint (the behaviour before it existed)", async () => {
    const job = unboundedJob("initial-interval", { interval: HOUR, initialDelay: HOUR });
    const running = job.execute();
    await until(() => job.status().state === "running", 5000);
    expect(await until(() => job.status().lastCompletedCheckpoint !== undefined, 600)).toBe(false);
    job.stop();
    await running;
  });
});
