import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkLiveness, checkReadiness } from "../runtime/job-health.js";
import type { JobState, JobStatus } from "../runtime/job-status.js";
import { combineStatuses, startingStatus } from "./combine-statuses.js";

const NOW = 1_800_000_000_000;
const STATES: JobState[] = [
  "created",
  "starting",
  "restoring",
  "running",
  "stopping",
  "restarting",
  "finished",
  "failed",
];

const statusOf = (index: number) =>
  fc
    .record({
      state: fc.constantFrom(...STATES),
      last: fc.option(fc.integer({ min: 0, max: 300_000 }), { nil: undefined }),
      running: fc.option(fc.integer({ min: 0, max: 300_000 }), { nil: undefined }),
      busy: fc.integer({ min: 0, max: 120_000 }),
      waiting: fc.boolean(),
    })
    .map(
      ({ state, last, running, busy, waiting }): JobStatus => ({
        ...startingStatus("orders", index, 1000),
        state,
        lastCompletedCheckpoint: last === undefined ? undefined : { id: index + 1, completedAt: NOW - last },
        runningSince: running === undefined ? undefined : NOW - running,
        subtasks: [{ index, lastProgressAt: NOW - busy, waiting, ended: false }],
        failure: state === "failed" ? `subtask ${index} broke` : undefined,
      }),
    );

describe("combineStatuses", () => {
  it("is live and ready exactly when every thread is", () => {
    fc.assert(
      fc.property(fc.tuple(statusOf(0), statusOf(1), statusOf(2)), (statuses) => {
        const combined = combineStatuses(statuses);
        const options = { now: NOW, maxCheckpointAgeMs: 60_000 };
        expect(checkLiveness(combined, { now: NOW }).ok).toBe(
          statuses.every((status) => checkLiveness(status, { now: NOW }).ok),
        );
        expect(checkReadiness(combined, options).ok).toBe(
          statuses.every((status) => checkReadiness(status, options).ok),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it("shows the state furthest from running, every subtask loop, and the first failure", () => {
    const running = { ...startingStatus("orders", 0, 1000), state: "running" as const, runningSince: NOW };
    const failed = { ...startingStatus("orders", 1, 1000), state: "failed" as const, failure: "boom" };
    const combined = combineStatuses([running, failed]);
    expect(combined).toMatchObject({ state: "failed", failure: "boom", subtaskIndexes: [0, 1] });
    expect(checkLiveness(combined).reason).toBe("the job failed: boom");
    expect(() => combineStatuses([])).toThrow(RangeError);
  });
});
