import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { FileSystemCheckpointStorage } from "../checkpoint/filesystem-checkpoint-storage.js";
import { MemoryCheckpointStorage } from "../checkpoint/memory-checkpoint-storage.js";
import {
  CheckpointError,
  ConfigurationError,
  OnceflowError,
  TransactionError,
} from "../errors/onceflow-error.js";
import { createMemoryLogger } from "../observability/logger.js";
import { createMemoryMetrics, MetricNames } from "../observability/metrics.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import type { Sink } from "../sink/sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

const numbers = (count: number, recordsPerSecond?: number) =>
  new GeneratorSource({
    count,
    generate: (index) => index,
    ...(recordsPerSecond ? { recordsPerSecond } : {}),
  });

const directories: string[] = [];
afterEach(async () => {
  for (const directory of directories.splice(0)) await rm(directory, { recursive: true, force: true });
});

describe("Job lifecycle", () => {
  it("commits two-phase-commit sinks at the end of input even with checkpointing off", async () => {
    const output = new CollectedOutput<number>();
    const job = new Job({ jobId: "no-checkpoints", restartStrategy: { type: "none" } });
    job.fromSource(numbers(1000), { uid: "in" }).sinkTo(output.sinkFactory(), { uid: "out" });
    const result = await job.execute();
    expect(output.committed).toHaveLength(1000);
    expect(output.pending).toHaveLength(0);
    expect(result.lastCheckpointId).toBe(1);
  });

  it("feeds several sinks from one stream, each exactly once", async () => {
    const even = new CollectedOutput<number>();
    const all = new CollectedOutput<string>();
    const job = new Job({
      jobId: "two-sinks",
      checkpointing: { interval: 10, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    const stream = job.fromSource(numbers(2000), { uid: "in" });
    stream.filter((value) => value % 2 === 0).sinkTo(even.sinkFactory(), { uid: "even" });
    stream.map((value) => `#${value}`).sinkTo(all.sinkFactory(), { uid: "all" });
    await job.execute();
    expect(even.committed).toHaveLength(1000);
    expect(all.committed).toHaveLength(2000);
  });

  it("unions two sources and keeps each source's position in the checkpoint", async () => {
    const output = new CollectedOutput<number>();
    const storage = new MemoryCheckpointStorage();
    const job = new Job({
      jobId: "union",
      checkpointing: { interval: 10, storage },
      restartStrategy: { type: "none" },
    });
    const low = job.fromSource(numbers(500), { uid: "low" });
    const high = job.fromSource(new GeneratorSource({ count: 500, generate: (index) => 10_000 + index }), {
      uid: "high",
    });
    low.union(high).sinkTo(output.sinkFactory(), { uid: "out" });
    await job.execute();
    expect(new Set(output.committed).size).toBe(1000);
    const latest = (await storage.list("union")).at(-1)!;
    expect(Object.keys(latest.summary.splits as object).sort()).toEqual([
      "high/generator-0",
      "low/generator-0",
    ]);
  });

  it("reports checkpoint metrics and records in/out through the injected registry", async () => {
    const metrics = createMemoryMetrics();
    const output = new CollectedOutput<number>();
    const job = new Job({
      jobId: "metrics",
      metrics,
      checkpointing: { interval: 20, storage: "memory" },
      restartStrategy: { type: "none" },
    });
    job.fromSource(numbers(5000, 50_000), { uid: "in" }).sinkTo(output.sinkFactory(), { uid: "out" });
    const result = await job.execute();
    expect(metrics.read(MetricNames.recordsIn)).toBe(5000);
    expect(metrics.read(MetricNames.recordsOut)).toBe(5000);
    expect(metrics.read(MetricNames.lastCompletedCheckpointId)).toBe(result.lastCheckpointId);
    expect(metrics.observations(MetricNames.checkpointDurationSeconds).length).toBeGreaterThan(1);
  });

  it("fails at once, without restarting, on a permanent error such as a timed-out transaction", async () => {
    let attempts = 0;
    const failing: Sink<number> = {
      write: () => {
        attempts++;
        throw new TransactionError(
          "TRANSACTION_TIMED_OUT",
          "the broker aborted the transaction of checkpoint 3",
        );
      },
    };
    const job = new Job({
      jobId: "permanent",
      restartStrategy: { type: "fixed-delay", attempts: 5, delay: 1 },
    });
    job.fromSource(numbers(10), { uid: "in" }).sinkTo(failing, { uid: "out" });
    await expect(job.execute()).rejects.toMatchObject({ code: "TRANSACTION_TIMED_OUT" });
    expect(attempts).toBe(1);
  });

  it("gives up after the restart strategy's attempts with JOB_FAILED and the cause", async () => {
    const job = new Job({
      jobId: "give-up",
      restartStrategy: { type: "fixed-delay", attempts: 2, delay: 1 },
    });
    let attempts = 0;
    job
      .fromSource(numbers(10), { uid: "in" })
      .map(() => {
        attempts++;
        throw new Error("always broken");
      })
      .sinkTo({ write: () => {} }, { uid: "out" });
    const error = await job.execute().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OnceflowError);
    expect((error as OnceflowError).code).toBe("JOB_FAILED");
    expect(((error as OnceflowError).cause as Error).message).toBe("always broken");
    expect(attempts).toBe(3);
  });

  it("fails the job when checkpoints keep timing out beyond tolerableFailures", async () => {
    const logger = createMemoryLogger();
    const slowStorage: CheckpointStorage = Object.assign(new MemoryCheckpointStorage(), {
      store: () => new Promise<void>(() => {}),
    });
    const job = new Job({
      jobId: "timeouts",
      logger,
      checkpointing: { interval: 10, timeout: 30, tolerableFailures: 1, storage: slowStorage },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(new GeneratorSource({ generate: (index) => index, recordsPerSecond: 1000 }), { uid: "in" })
      .sinkTo({ write: () => {} }, { uid: "out" });
    const error = (await job.execute().catch((caught: unknown) => caught)) as OnceflowError;
    expect(error.code).toBe("JOB_FAILED");
    expect(error.cause).toBeInstanceOf(CheckpointError);
    expect(logger.entries.filter((entry) => entry.message.startsWith("checkpoint failed"))).toHaveLength(2);
  }, 10_000);

  it("validates its configuration with messages that name the setting", () => {
    expect(() => new Job({ jobId: "bad id!" })).toThrow(/jobId/);
    expect(() => new Job({ jobId: "j", parallelism: 0 })).toThrow(ConfigurationError);
    expect(() => new Job({ jobId: "j", parallelism: 2, subtaskIndex: 2 })).toThrow(/subtaskIndex/);
    expect(() => new Job({ jobId: "j", checkpointing: { interval: 1 } })).toThrow(/checkpointing.interval/);
    expect(() => new Job({ jobId: "j", checkpointing: { interval: 100, maxConcurrent: 2 } })).toThrow(
      /maxConcurrent/,
    );
    const shared = new Job({ jobId: "j", parallelism: 2 });
    shared
      .fromSource(numbers(1))
      .sinkTo(new CollectedOutput<number>().sinkFactory()({ subtaskIndex: 0, parallelism: 2 }));
    return expect(shared.execute()).rejects.toThrow(/pass a factory/);
  });

  it("restores a named checkpoint and says clearly when it does not exist", async () => {
    const job = new Job({
      jobId: "named",
      checkpointing: { interval: 100, storage: "memory" },
      restore: { checkpointId: 7 },
    });
    job.fromSource(numbers(1)).sinkTo({ write: () => {} });
    await expect(job.execute()).rejects.toMatchObject({ code: "CHECKPOINT_NOT_FOUND" });
  });

  it("stops with a final checkpoint and exits 0 on SIGTERM", async () => {
    const directory = await mkdtemp(join(tmpdir(), "onceflow-sigterm-"));
    directories.push(directory);
    const script = join(directory, "job.mjs");
    const core = fileURLToPath(new URL("../index.ts", import.meta.url));
    await writeFile(
      script,
      `import { Job, GeneratorSource, FileSink, filesystem } from ${JSON.stringify(core)};
       const job = new Job({ jobId: "sigterm", handleSignals: true, checkpointing: { interval: 60000, storage: filesystem(${JSON.stringify(join(directory, "checkpoints"))}) } });
       job.fromSource(new GeneratorSource({ generate: (i) => i, recordsPerSecond: 2000 }), { uid: "in" })
          .sinkTo(new FileSink({ directory: ${JSON.stringify(join(directory, "out"))} }), { uid: "out" });
       setTimeout(() => process.stdout.write("running\\n"), 300);
       const result = await job.execute();
       process.stdout.write(JSON.stringify(result) + "\\n");`,
    );
    const child = spawn(process.execPath, ["--import", "tsx", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes("running") && !child.killed) child.kill("SIGTERM");
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      endedBy: string;
      lastCheckpointId: number;
    };
    expect(result.endedBy).toBe("stop");
    const stored = await new FileSystemCheckpointStorage(join(directory, "checkpoints")).list("sigterm");
    expect(stored.at(-1)).toMatchObject({ checkpointId: result.lastCheckpointId, isFinal: true });
  }, 30_000);
});
