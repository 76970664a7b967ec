import { describe, expect, it } from "vitest";
import { createMemoryLogger, type Logger } from "../observability/logger.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";
import { checkLiveness } from "./job-health.js";
import type { JobStatus } from "./job-status.js";

const unbounded = () => new GeneratorSource({ generate: (index) => index, recordsPerSecond: 2000 });

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe("job.status()", () => {
  it("goes from created to running with its subtask loops, counts checkpoints, then stops and finishes", async () => {
    const output = new CollectedOutput<number>();
    const job = new Job({
      jobId: "status",
      parallelism: 2,
      // Checkpoints only when triggered below.
      checkpointing: { interval: 3_600_000, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job.fromSource(unbounded(), { uid: "in" }).sinkTo(output.sinkFactory(), { uid: "out" });
    expect(job.status()).toMatchObject({
      jobId: "status",
      state: "created",
      subtasks: [],
      subtaskIndexes: [0, 1],
      checkpointInterval: 3_600_000,
      lastCompletedCheckpoint: undefined,
    });

    const running = job.execute();
    await until(() => job.status().state === "running");
    const live = job.status();
    expect(live.subtasks.map((subtask) => subtask.index)).toEqual([0, 1]);
    expect(live.runningSince).toBeTypeOf("number");
    expect(live.attempt).toBe(0);
    expect(checkLiveness(live).ok).toBe(true);

    const checkpointId = await job.triggerCheckpoint();
    const afterCheckpoint = job.status().lastCompletedCheckpoint;
    expect(afterCheckpoint?.id).toBe(checkpointId);
    expect(afterCheckpoint?.completedAt).toBeGreaterThanOrEqual(live.runningSince ?? Infinity);

    job.stop();
    expect(job.status().state).toBe("stopping");
    const result = await running;
    const finished = job.status();
    expect(finished.state).toBe("finished");
    expect(finished.subtasks).toEqual([]);
    // The final checkpoint is the last completed one.
    expect(finished.lastCompletedCheckpoint?.id).toBe(result.lastCheckpointId);
  });

  it("is restarting between attempts, restoring on the next, and failed when the strategy gives up", async () => {
    const seen: JobStatus[] = [];
    const memory = createMemoryLogger();
    let job: Job | undefined;
    // The job logs each failed attempt right after its status changed: look at it there.
    const error = (fields: Record<string, unknown> | string, message?: string): void => {
      if (job) seen.push(job.status());
      if (typeof fields === "string") memory.error(fields);
      else memory.error(fields, message);
    };
    const logger: Logger = { ...memory, error, child: () => logger };
    job = new Job({
      jobId: "status-failing",
      checkpointing: { interval: 3_600_000, storage: "memory" },
      restartStrategy: { type: "fixed-delay", attempts: 1, delay: 10 },
      logger,
    });
    job
      .fromSource(unbounded(), { uid: "in" })
      .map((value) => {
        if (value === 50) throw new Error("boom at 50");
        return value;
      })
      .sinkTo(new CollectedOutput<number>().sinkFactory(), { uid: "out" });
    await expect(job.execute()).rejects.toMatchObject({ code: "JOB_FAILED" });
    const states = seen.map((status) => [status.state, status.attempt]);
    expect(states).toContainEqual(["restarting", 0]);
    expect(states).toContainEqual(["failed", 1]);
    const failed = job.status();
    expect(failed.state).toBe("failed");
    expect(failed.failure).toContain("boom at 50");
    expect(checkLiveness(failed)).toMatchObject({ ok: false });
  });
});
