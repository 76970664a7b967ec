import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

// The built CLI (`npm run build -w @onceflow/core`), as a user runs it: stderr is a pipe here, not a terminal.
const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const core = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

const folders: string[] = [];
afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A bounded job: 500 generated numbers into a FileSink, checkpointed to `checkpoints/`. */
const boundedJob = `import { FileSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(core)};
export function createJob(launch) {
  const job = new Job({ jobId: "numbers", checkpointing: { interval: 100, storage: filesystem("checkpoints") }, ...launch });
  job
    .fromSource(new GeneratorSource({ count: 500, generate: (index) => index }), { uid: "numbers" })
    .sinkTo(() => new FileSink({ directory: "output" }), { uid: "out" });
  return job;
}
`;

async function folderWith(files: Record<string, string>): Promise<string> {
  const cwd = await mkdtemp(join(tmpdir(), "onceflow-run-logging-"));
  folders.push(cwd);
  for (const [name, text] of Object.entries(files)) await writeFile(join(cwd, name), text);
  return cwd;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const { ONCEFLOW_LOG_LEVEL: _level, ONCEFLOW_LOG_FORMAT: _format, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args],
      { cwd, env: { ...inherited, ...env } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .trimEnd()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("onceflow run: the job's log on stderr", () => {
  it("logs at info as JSON lines when stderr is not a terminal", async () => {
    const cwd = await folderWith({ "job.mjs": boundedJob });
    const result = await run(cwd, ["run", "job.mjs"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^job finished: \{"jobId":"numbers","endedBy":"end-of-input"/);
    const lines = jsonLines(result.stderr);
    expect(lines.map((line) => line.msg)).toEqual(
      expect.arrayContaining(["checkpoint completed", "job finished"]),
    );
    for (const line of lines) {
      expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "msg"]);
      expect(line.job).toBe("numbers");
    }
    expect(new Set(lines.map((line) => line.level))).toEqual(new Set(["info"]));
  });

  it("writes readable lines with --log-format text, and nothing below --log-level", async () => {
    const cwd = await folderWith({ "job.mjs": boundedJob });
    const text = await run(cwd, ["run", "job.mjs", "--log-format", "text", "--log-level", "debug"]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toMatch(/^\S+Z INFO checkpoint completed \{"job":"numbers","checkpointId":1,/m);
    expect(text.stderr).toMatch(/^\S+Z DEBUG /m);
    const quiet = await run(cwd, ["run", "job.mjs", "--log-level", "warn"], { ONCEFLOW_LOG_FORMAT: "text" });
    expect(quiet.code).toBe(0);
    // The re-run restores the first run's final checkpoint: only that warning is left.
    expect(quiet.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(quiet.stderr).toMatch(/^\S+Z WARN the job restored checkpoint \d+, the final checkpoint of a run/);
  });

  it("takes the level from ONCEFLOW_LOG_LEVEL, and rejects a level it does not know", async () => {
    const cwd = await folderWith({ "job.mjs": boundedJob });
    const silent = await run(cwd, ["run", "job.mjs"], { ONCEFLOW_LOG_LEVEL: "silent" });
    expect(silent).toMatchObject({ code: 0, stderr: "" });
    const wrong = await run(cwd, ["run", "job.mjs", "--log-level", "verbose"]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(
      'error [CONFIGURATION]: --log-level: must be debug, info, warn, error or silent, got "verbose"\n',
    );
  });

  it("says so when the job restored the final checkpoint of a run whose input had ended", async () => {
    const cwd = await folderWith({ "job.mjs": boundedJob });
    const first = await run(cwd, ["run", "job.mjs"]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).not.toMatch(/nothing new was read/);
    const again = await run(cwd, ["run", "job.mjs"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/"resumedAtEndOfInput":true/);
    expect(again.stdout).toMatch(
      /^nothing new was read: the job restored checkpoint \d+, the final checkpoint of a run whose input had ended/m,
    );
    const warning = jsonLines(again.stderr).find((line) => line.level === "warn");
    expect(warning?.msg).toMatch(/bounded sources resumed at their end/);
  });
});

describe("onceflow run: a module that runs its job when imported", () => {
  it("is told that the module ran a job at import, and how to export it instead", async () => {
    const cwd = await folderWith({
      "eager.mjs": boundedJob
        .replace("export function createJob", "function createJob")
        .concat("await createJob().execute();\n"),
    });
    const result = await run(cwd, ["run", "eager.mjs"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^error \[CONFIGURATION\]: <module>: the module ran a job when it was imported \(it calls execute\(\) at its top level; it exports nothing\): onceflow run executes the job itself\. Export createJob\(launch\)/m,
    );
  });
});
