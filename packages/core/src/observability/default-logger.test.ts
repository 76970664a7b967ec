import { execFile } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Job } from "../runtime/job.js";
import { CollectedOutput } from "../sink/collect-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { defaultLogger, setDefaultLogger } from "./default-logger.js";
import { createConsoleLogger, createMemoryLogger, type Logger } from "./logger.js";

const core = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

let restore: Logger | undefined;
afterEach(() => {
  if (restore !== undefined) setDefaultLogger(restore);
  restore = undefined;
});

/** Runs a script with the built package in a fresh process; resolves with its stderr. */
function stderrOf(script: string, env: Record<string, string> = {}): Promise<string> {
  const { ONCEFLOW_LOG_LEVEL: _level, ONCEFLOW_LOG_FORMAT: _format, ...inherited } = process.env;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", script],
      { env: { ...inherited, ...env } },
      (error, _stdout, stderr) => (error === null ? resolve(stderr) : reject(new Error(stderr))),
    );
  });
}

/** A job that fails once (a restart) and then finishes, given no logger. */
const restartingJob = `
import { CollectedOutput, GeneratorSource, Job } from ${JSON.stringify(core)};
let failed = false;
const job = new Job({ jobId: "restarting", checkpointing: { interval: 50, storage: "memory" }, restartStrategy: { type: "fixed-delay", attempts: 2, delay: 1 } });
job.fromSource(new GeneratorSource({ count: 20, generate: (index) => index }), { uid: "numbers" })
  .map((value) => { if (value === 10 && !failed) { failed = true; throw new Error("a transient failure"); } return value; }, { uid: "flaky" })
  .sinkTo(new CollectedOutput().sinkFactory(), { uid: "out" });
await job.execute();
`;

describe("defaultLogger", () => {
  it("writes what an operator must know (a restart) to stderr without being configured, and no info", async () => {
    const stderr = await stderrOf(restartingJob);
    const lines = stderr
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((line) => [line.level, line.msg])).toEqual([["error", "job attempt failed"]]);
    expect(lines[0]).toMatchObject({
      job: "restarting",
      attempt: 0,
      err: { message: "a transient failure" },
    });
  });

  it("follows ONCEFLOW_LOG_LEVEL and ONCEFLOW_LOG_FORMAT", async () => {
    const info = await stderrOf(restartingJob, { ONCEFLOW_LOG_LEVEL: "info", ONCEFLOW_LOG_FORMAT: "text" });
    expect(info).toMatch(/^\S+Z INFO job finished \{"job":"restarting"/m);
    expect(await stderrOf(restartingJob, { ONCEFLOW_LOG_LEVEL: "silent" })).toBe("");
  });

  it("sends a job's lines to what setDefaultLogger set, also for a job built before", async () => {
    const output = new CollectedOutput<number>();
    const job = new Job({ jobId: "defaulted", checkpointing: { interval: 50, storage: "memory" } });
    job
      .fromSource(new GeneratorSource({ count: 5, generate: (index) => index }), { uid: "numbers" })
      .sinkTo(output.sinkFactory(), { uid: "out" });
    const memory = createMemoryLogger();
    restore = setDefaultLogger(memory);
    await job.execute();
    expect(memory.entries).toContainEqual(
      expect.objectContaining({
        level: "info",
        message: "job finished",
        fields: expect.objectContaining({ job: "defaulted" }),
      }),
    );
    defaultLogger.child({ extra: 1 }).warn({ more: 2 }, "through a child");
    expect(memory.entries.at(-1)).toEqual({
      level: "warn",
      message: "through a child",
      fields: { extra: 1, more: 2 },
    });
  });
});

describe("createConsoleLogger", () => {
  it("writes JSON lines with time, level and msg first, which fields cannot replace", () => {
    const written: string[] = [];
    const logger = createConsoleLogger({
      format: "json",
      level: "warn",
      stream: { write: (text: string) => written.push(text) },
    });
    logger.info("left out");
    logger.child({ job: "j" }).warn({ level: "not this", password: "hunter2" }, "kept");
    expect(written).toHaveLength(1);
    const line = JSON.parse(written[0] ?? "") as Record<string, unknown>;
    expect(Object.keys(line)).toEqual(["time", "level", "msg", "job", "password"]);
    expect(line).toMatchObject({ level: "warn", msg: "kept", job: "j", password: "[redacted]" });
  });
});
