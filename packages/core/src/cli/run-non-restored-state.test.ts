import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { readCommittedFiles } from "../sink/file-sink.js";

// `onceflow run --allow-non-restored-state`, as a user runs the built CLI: a job restarted with a
// renamed uid is refused, and runs with the flag — in one process and in threads at another
// parallelism.

const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const core = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;
const COUNT = 2_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

// A running count per key (KEYED=1; otherwise a stateless map: threads run one subtask each, and
// keyBy there needs an exchange between them); uids and the parallelism come from the environment.
const JOB = `import { FileSink, GeneratorSource, Job, createConsoleLogger, filesystem } from ${JSON.stringify(core)};
class RunningCount {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(reading, _context, out) {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect({ ...reading, count });
  }
}
export function createJob(launch) {
  const job = new Job({
    jobId: "claims-cli",
    parallelism: Number(process.env.PARALLELISM),
    checkpointing: { interval: 100, storage: filesystem("checkpoints") },
    restartStrategy: { type: "none" },
    logger: createConsoleLogger({ level: "warn" }),
    ...launch,
  });
  const readings = job.fromSource(
    new GeneratorSource({ count: ${COUNT}, splits: 4, generate: (index) => ({ index, key: "key-" + (index % 5) }) }),
    { uid: "readings" },
  );
  const counted = process.env.KEYED === "1"
    ? readings.keyBy((reading) => reading.key).process(() => new RunningCount(), { uid: process.env.COUNT_UID })
    : readings.map((reading) => ({ ...reading, count: 0 }), { uid: process.env.COUNT_UID });
  counted.sinkTo(() => new FileSink({ directory: "output" }), { uid: process.env.SINK_UID });
  return job;
}
`;

async function workFolder(): Promise<string> {
  const cwd = await mkdtemp(join(tmpdir(), "onceflow-run-claims-"));
  cleanups.push(() => rm(cwd, { recursive: true, force: true }));
  await writeFile(join(cwd, "job.mjs"), JOB);
  return cwd;
}

function run(
  cwd: string,
  env: { PARALLELISM: string; KEYED: "0" | "1"; COUNT_UID: string; SINK_UID: string },
  args: string[] = [],
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [cli, "run", "job.mjs", ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, output })));
}

async function expectAllOnce(cwd: string): Promise<void> {
  const written = await readCommittedFiles<{ index: number }>(join(cwd, "output"));
  expect(written.map((record) => record.index).sort((a, b) => a - b)).toEqual(
    Array.from({ length: COUNT }, (_, index) => index),
  );
}

describe("onceflow run --allow-non-restored-state", () => {
  it("refuses a restart with a renamed uid, and runs with the flag, warning what it drops", async () => {
    const cwd = await workFolder();
    const first = await run(cwd, { PARALLELISM: "1", KEYED: "1", COUNT_UID: "count", SINK_UID: "out" });
    expect(first, first.output).toMatchObject({ code: 0 });
    await expectAllOnce(cwd);

    const refused = await run(cwd, { PARALLELISM: "1", KEYED: "1", COUNT_UID: "count-v2", SINK_UID: "out" });
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(
      /error \[NON_RESTORED_STATE\]: job 'claims-cli': checkpoint \d+ holds state that no operator of the job claims: operator 'count' \(keyed state; subtask 0\)/,
    );
    expect(refused.output).toContain("--allow-non-restored-state");

    const allowed = await run(cwd, { PARALLELISM: "1", KEYED: "1", COUNT_UID: "count-v2", SINK_UID: "out" }, [
      "--allow-non-restored-state",
    ]);
    expect(allowed, allowed.output).toMatchObject({ code: 0 });
    expect(allowed.output).toMatch(
      /WARN allowNonRestoredState: dropping state of checkpoint \d+ that no operator of the job claims: operator 'count' \(keyed state/,
    );
    await expectAllOnce(cwd);
  }, 120_000);

  it("does the same with --threads at another parallelism, for a renamed sink", async () => {
    const cwd = await workFolder();
    const uids = { KEYED: "0", COUNT_UID: "numbered" } as const;
    const first = await run(cwd, { PARALLELISM: "1", ...uids, SINK_UID: "out" });
    expect(first, first.output).toMatchObject({ code: 0 });

    const refused = await run(cwd, { PARALLELISM: "2", ...uids, SINK_UID: "out-v2" }, ["--threads"]);
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(
      /error \[NON_RESTORED_STATE\]: .*operator 'out' \(sink transactions: 1 pending/,
    );

    const allowed = await run(cwd, { PARALLELISM: "2", ...uids, SINK_UID: "out-v2" }, [
      "--threads",
      "--allow-non-restored-state",
    ]);
    expect(allowed, allowed.output).toMatchObject({ code: 0 });
    expect(allowed.output).toMatch(
      /WARN allowNonRestoredState: dropping state .*operator 'out' \(sink transactions: .*pending ones are not committed by this job/,
    );
    await expectAllOnce(cwd);
  }, 120_000);

  it("does the same for keyed state in threads (the main thread coordinating them), at parallelism 2", async () => {
    const cwd = await workFolder();
    const first = await run(cwd, { PARALLELISM: "1", KEYED: "1", COUNT_UID: "count", SINK_UID: "out" });
    expect(first, first.output).toMatchObject({ code: 0 });

    const keyed = { PARALLELISM: "2", KEYED: "1", COUNT_UID: "count-v2", SINK_UID: "out" } as const;
    const refused = await run(cwd, keyed, ["--threads"]);
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/error \[NON_RESTORED_STATE\]: .*operator 'count' \(keyed state/);

    const allowed = await run(cwd, keyed, ["--threads", "--allow-non-restored-state"]);
    expect(allowed, allowed.output).toMatchObject({ code: 0 });
    expect(allowed.output).toMatch(
      /WARN allowNonRestoredState: dropping state .*operator 'count' \(keyed state/,
    );
    await expectAllOnce(cwd);
  }, 120_000);
});
