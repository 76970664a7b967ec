import { describe, expect, it } from "vitest";
import { checkLiveness, checkReadiness, defaultMaxCheckpointAge } from "./job-health.js";
import type { JobStatus } from "./job-status.js";

const now = 1_700_000_000_000;
const running: JobStatus = {
  jobId: "j",
  state: "running",
  since: now - 600_000,
  attempt: 0,
  restoredCheckpointId: 4,
  lastCompletedCheckpoint: { id: 9, completedAt: now - 5_000 },
  runningSince: now - 600_000,
  checkpointInterval: 1_000,
  subtaskIndexes: [0, 1],
  subtasks: [
    { index: 0, lastProgressAt: now - 10, waiting: false, ended: false },
    { index: 1, lastProgressAt: now - 3_600_000, waiting: true, ended: false },
  ],
  failure: undefined,
};

describe("checkLiveness", () => {
  it("is live while every loop is busy for less than the limit or waiting, however long", () => {
    expect(checkLiveness(running, { now })).toMatchObject({ ok: true });
  });

  it("is not live when a loop has been inside one step for longer than the limit", () => {
    const stuck: JobStatus = {
      ...running,
      subtasks: [{ index: 0, lastProgressAt: now - 61_000, waiting: false, ended: false }],
    };
    expect(checkLiveness(stuck, { now })).toMatchObject({
      ok: false,
      reason: expect.stringContaining("subtask 0"),
    });
    expect(checkLiveness(stuck, { now, maxStepMs: 120_000 })).toMatchObject({ ok: true });
  });

  it("is live while restoring or restarting, and not once the job failed", () => {
    expect(checkLiveness({ ...running, state: "restarting", subtasks: [] }, { now }).ok).toBe(true);
    expect(checkLiveness({ ...running, state: "restoring", subtasks: [] }, { now }).ok).toBe(true);
    expect(checkLiveness({ ...running, state: "failed", failure: "boom" }, { now })).toEqual({
      ok: false,
      reason: "the job failed: boom",
    });
  });
});

describe("checkReadiness", () => {
  it("is ready when running, live and the last checkpoint is younger than the limit", () => {
    expect(checkReadiness(running, { now, maxCheckpointAgeMs: 10_000 })).toMatchObject({ ok: true });
  });

  it("is not ready when the last completed checkpoint is older than the limit", () => {
    const verdict = checkReadiness(running, { now, maxCheckpointAgeMs: 4_000 });
    expect(verdict.ok).toBe(false);
    expect(verdict.reason).toContain("no checkpoint completed for 5 s (limit 4 s)");
  });

  it("counts from the start of running before the attempt completed a checkpoint", () => {
    const restored: JobStatus = { ...running, lastCompletedCheckpoint: undefined, runningSince: now - 1_000 };
    expect(checkReadiness(restored, { now, maxCheckpointAgeMs: 4_000 }).ok).toBe(true);
    expect(checkReadiness(restored, { now: now + 10_000, maxCheckpointAgeMs: 4_000 })).toMatchObject({
      ok: false,
      reason: expect.stringContaining("none completed yet"),
    });
  });

  it("is not ready unless running, nor when a loop is stuck; checkpointing off needs no checkpoint", () => {
    for (const state of ["starting", "restoring", "restarting", "stopping", "finished"] as const) {
      expect(checkReadiness({ ...running, state }, { now }).ok).toBe(false);
    }
    const stuck: JobStatus = {
      ...running,
      subtasks: [{ index: 1, lastProgressAt: now - 120_000, waiting: false, ended: false }],
    };
    expect(checkReadiness(stuck, { now }).ok).toBe(false);
    const unchecked: JobStatus = {
      ...running,
      checkpointInterval: undefined,
      lastCompletedCheckpoint: undefined,
    };
    expect(checkReadiness(unchecked, { now, maxCheckpointAgeMs: 1 }).ok).toBe(true);
  });

  it("defaults the limit to three intervals, at least a minute", () => {
    expect(defaultMaxCheckpointAge(1_000)).toBe(60_000);
    expect(defaultMaxCheckpointAge(60_000)).toBe(180_000);
    expect(defaultMaxCheckpointAge(undefined)).toBe(60_000);
  });
});
