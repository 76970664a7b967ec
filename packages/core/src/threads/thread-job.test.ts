import { describe, expect, it } from "vitest";
import { filesystem } from "../checkpoint/filesystem-checkpoint-storage.js";
import { Job, type JobOptions } from "../runtime/job.js";
import type { JobLaunchOptions } from "../runtime/job-launch-options.js";
import { buildThreadJob, pickJobFactory, threadPlanOf } from "./thread-job.js";

const jobOf =
  (options: Omit<JobOptions, "jobId">) =>
  (launch: JobLaunchOptions): Job =>
    new Job({ jobId: "threads-unit", ...options, ...launch });

describe("pickJobFactory", () => {
  it("takes createJob, or the named export", () => {
    const createJob = jobOf({});
    const other = jobOf({});
    expect(pickJobFactory({ createJob, other }, undefined)).toBe(createJob);
    expect(pickJobFactory({ createJob, other }, "other")).toBe(other);
  });

  it("refuses a module without a function that builds the job, saying to export createJob(launch)", () => {
    expect(() => pickJobFactory({ job: new Job({ jobId: "built" }) }, undefined)).toThrow(
      /module: the module has no export "createJob" \(it exports job\).*export createJob\(launch\)/,
    );
    expect(() => pickJobFactory({ job: new Job({ jobId: "built" }) }, "job")).toThrow(
      /exportName: export "job" is not a function; each thread builds the job of its own subtask/,
    );
    expect(() => pickJobFactory({ createJob: jobOf({}) }, "missing")).toThrow(/no export "missing"/);
  });
});

describe("buildThreadJob", () => {
  it("returns the job of the launch's subtask", async () => {
    const job = await buildThreadJob(jobOf({ parallelism: 3 }), { subtaskIndex: 2 });
    expect(job.status().subtaskIndexes).toEqual([2]);
  });

  it("refuses a factory that ignores launch.subtaskIndex (every thread would run every subtask)", async () => {
    const ignoring = () => new Job({ jobId: "ignores", parallelism: 2 });
    await expect(buildThreadJob(ignoring, { subtaskIndex: 1 })).rejects.toThrow(
      /runs subtask\(s\) 0, 1, not 1: spread launch into the options/,
    );
  });

  it("refuses what is not a Job, and turns a factory's plain error into CONFIGURATION", async () => {
    await expect(buildThreadJob(() => ({ execute: async () => {} }), {})).rejects.toThrow(
      /did not return a Job of @onceflow\/core/,
    );
    await expect(
      buildThreadJob(() => {
        throw new Error("no BROKERS set");
      }, {}),
    ).rejects.toMatchObject({ code: "CONFIGURATION", message: "no BROKERS set" });
  });
});

describe("threadPlanOf", () => {
  const shared = filesystem("/tmp/onceflow-threads-unit-never-written");

  it("reads the parallelism of the job built without a subtask", async () => {
    const job = await buildThreadJob(
      jobOf({ parallelism: 4, checkpointing: { interval: 1000, storage: shared } }),
      {},
    );
    expect(threadPlanOf(job)).toEqual({ jobId: "threads-unit", parallelism: 4 });
  });

  it("refuses in-memory checkpoints at parallelism > 1: each thread would have its own", async () => {
    const job = await buildThreadJob(
      jobOf({ parallelism: 2, checkpointing: { interval: 1000, storage: "memory" } }),
      {},
    );
    expect(() => threadPlanOf(job)).toThrow(
      /checkpointing\.storage: job threads-unit keeps its checkpoints in memory.*use a storage the threads share, filesystem/,
    );
  });

  it("refuses a job without checkpointing at parallelism > 1", async () => {
    const job = await buildThreadJob(jobOf({ parallelism: 2 }), {});
    expect(() => threadPlanOf(job)).toThrow(
      /checkpointing: job threads-unit runs 2 subtasks without checkpointing/,
    );
  });

  it("lets one subtask run in one thread with any storage", async () => {
    const memory = await buildThreadJob(jobOf({ checkpointing: { interval: 1000, storage: "memory" } }), {});
    expect(threadPlanOf(memory).parallelism).toBe(1);
    expect(threadPlanOf(await buildThreadJob(jobOf({}), {})).parallelism).toBe(1);
  });
});
