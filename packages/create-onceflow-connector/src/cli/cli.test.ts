import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

// The command as a user runs it (from the sources): flags, prompts answered on stdin, errors.

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
// Runs in an empty folder, so tsx is given by its location rather than its name.
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
let work = "";

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), "create-onceflow-connector-cli-"));
});

afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

function runCli(
  args: readonly string[],
  input = "",
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ["--import", tsx, main, ...args],
      { cwd: work, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : -1,
          stdout,
          stderr,
        });
      },
    );
    child.stdin?.end(input);
  });
}

describe("create-onceflow-connector", () => {
  it("--help prints the usage and writes nothing", async () => {
    const result = await runCli(["--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("usage: npm create onceflow-connector");
    expect(await readdir(work)).toEqual([]);
  });

  it("with flags and --yes asks nothing", async () => {
    const result = await runCli(["--name", "onceflow-connector-acme", "--kind", "custom", "--yes"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      "Wrote onceflow-connector-acme (custom, AcmeSink) to onceflow-connector-acme",
    );
    expect(await readdir(join(work, "onceflow-connector-acme", "src"))).toEqual(["acme-sink.ts", "index.ts"]);
  });

  it("asks for what is not given, one answer per line", async () => {
    const result = await runCli([], "@acme/onceflow-connector-ledger\nredis\n\n");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Package name (onceflow-connector-custom): ");
    expect(result.stdout).toContain("Kind (custom, redis, source) (custom): ");
    expect(result.stdout).toContain("Folder (onceflow-connector-ledger): ");
    const json = JSON.parse(await readFile(join(work, "onceflow-connector-ledger", "package.json"), "utf8"));
    expect(json.name).toBe("@acme/onceflow-connector-ledger");
    expect(json.dependencies).toHaveProperty("redis");
  });

  it("fails with exit 2 and says what to do when the input ends before an answer", async () => {
    const result = await runCli(["--kind", "custom"], "");
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("error [CONFIGURATION]");
    expect(result.stderr).toContain("--yes");
    expect(await readdir(work)).toEqual([]);
  });

  it("fails with exit 2 on an unknown kind", async () => {
    const result = await runCli(["--name", "onceflow-connector-acme", "--kind", "mongo", "--yes"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("'mongo' is not a kind: use custom, redis or source");
  });
});
