import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { afterEach, describe, expect, it } from "vitest";

// The job of the root README, as a new user copies it: run by `onceflow run` and by `node`.
const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "packages/core/dist/cli.js");
const core = pathToFileURL(join(root, "packages/core/dist/index.js")).href;

const folders: string[] = [];
afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** The first ```ts block after "## A job", compiled to JavaScript, importing the built core. */
async function readmeJob(): Promise<string> {
  const readme = await readFile(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("\n## A job\n"));
  const code = /```ts\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (code === undefined) throw new Error('README.md has no ```ts block under "## A job"');
  const javascript = ts.transpileModule(code, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  expect(javascript).toContain('"@onceflow/core"');
  expect(javascript).toContain("count: 1_000_000");
  // A smaller input keeps the test short; everything else is the README's text.
  return javascript
    .replace('"@onceflow/core"', JSON.stringify(core))
    .replace("count: 1_000_000", "count: 20_000");
}

function run(cwd: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // As a user's shell has it: no log settings of the test run.
    const { ONCEFLOW_LOG_LEVEL: _level, ONCEFLOW_LOG_FORMAT: _format, ...env } = process.env;
    execFile(process.execPath, args, { cwd, env }, (error, stdout, stderr) => {
      resolve({
        code: error === null ? 0 : typeof error.code === "number" ? error.code : -1,
        stdout,
        stderr,
      });
    });
  });
}

async function committedFiles(cwd: string): Promise<string[]> {
  return (await readdir(join(cwd, "out"))).filter((name) => !name.startsWith("."));
}

describe("the root README's job", () => {
  it("runs with `onceflow run`, with its log on stderr", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-readme-job-"));
    folders.push(cwd);
    await writeFile(join(cwd, "clicks.mjs"), await readmeJob());
    const result = await run(cwd, [cli, "run", "clicks.mjs"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^job finished: \{"jobId":"clicks-per-user","endedBy":"end-of-input"/);
    expect(result.stderr).toMatch(/"msg":"job finished"/);
    expect(await committedFiles(cwd)).not.toEqual([]);
  });

  it("runs with `node` too", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-readme-job-"));
    folders.push(cwd);
    await writeFile(join(cwd, "clicks.mjs"), await readmeJob());
    const result = await run(cwd, ["clicks.mjs"]);
    expect(result.code, result.stderr).toBe(0);
    expect(await committedFiles(cwd)).not.toEqual([]);
  });
});
