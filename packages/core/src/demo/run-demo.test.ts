import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { demoReading } from "./demo-pipeline.js";
import { checkDemoOutput } from "./run-demo.js";

const facts = { seed: 1, checkpoints: 0, kills: 0, recoveries: 0, recoveryMs: [] };
const directories: string[] = [];
afterEach(async () => {
  for (const directory of directories.splice(0)) await rm(directory, { recursive: true, force: true });
});

async function outputWith(lines: object[]): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), "onceflow-demo-check-"));
  directories.push(directory);
  await mkdir(join(directory, "output"));
  await writeFile(
    join(directory, "output", "part-0-1-0000000000000000.jsonl"),
    lines.map((line) => `${JSON.stringify(line)}\n`).join(""),
  );
  return directory;
}

function truth(records: number): Array<{ key: string; windowStart: number; count: number }> {
  const counts = new Map<string, { key: string; windowStart: number; count: number }>();
  for (let index = 0; index < records; index++) {
    const { key, timestamp } = demoReading(index);
    const windowStart = timestamp - (timestamp % 1000);
    const entry = counts.get(`${key}@${windowStart}`) ?? { key, windowStart, count: 0 };
    entry.count++;
    counts.set(`${key}@${windowStart}`, entry);
  }
  return [...counts.values()];
}

describe("the demo's checker", () => {
  it("accepts the exact output", async () => {
    const report = await checkDemoOutput(await outputWith(truth(10_000)), 10_000, facts);
    expect(report).toMatchObject({ duplicates: 0, missing: 0, wrong: 0 });
  });

  it("catches duplicates, missing windows and wrong counts", async () => {
    const [first, second, ...rest] = truth(10_000);
    const report = await checkDemoOutput(
      await outputWith([first!, first!, ...rest.slice(1), { ...rest[0]!, count: rest[0]!.count + 1 }]),
      10_000,
      facts,
    );
    expect(second).toBeDefined();
    expect(report).toMatchObject({ duplicates: 1, missing: 1, wrong: 1 });
  });
});

describe("onceflow demo (built CLI)", () => {
  it("kills the job 5 times and finds the output exactly once", () => {
    const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
    const run = spawnSync(
      process.execPath,
      [cli, "demo", "--seed", "3", "--kills", "5", "--records", "40000"],
      {
        encoding: "utf8",
        timeout: 120_000,
      },
    );
    expect(run.stdout).toContain("exactly once: OK");
    expect(run.stdout).toMatch(/kills\s+5/);
    expect(run.status).toBe(0);
  }, 130_000);
});
