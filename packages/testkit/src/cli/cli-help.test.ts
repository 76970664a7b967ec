import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

// `onceflow-testkit prepare --help` prints the help and fetches nothing: run from the sources with
// an empty cache folder and a Maven that does not exist, so a download attempt would fail and show.

const cli = fileURLToPath(new URL("./main.ts", import.meta.url));
let cache = "";

beforeEach(async () => {
  cache = await mkdtemp(join(tmpdir(), "onceflow-testkit-cli-"));
});

afterEach(async () => {
  await rm(cache, { recursive: true, force: true });
});

function runCli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", cli, ...args],
      {
        env: { ...process.env, ONCEFLOW_CACHE_DIR: cache, ONCEFLOW_MAVEN: join(cache, "no-such-mvn") },
        timeout: 60_000,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe("onceflow-testkit help", () => {
  it.each(
    [["prepare", "--help"], ["prepare", "-h"], ["prepare", "--kafka", "4.1.1", "--help"], ["--help"]].map(
      (args) => ({ args, line: args.join(" ") }),
    ),
  )("onceflow-testkit $line prints the help and downloads nothing", async ({ args }) => {
    const result = await runCli(args);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("usage: onceflow-testkit prepare");
    expect(result.stdout).toContain(cache);
    expect(await readdir(cache)).toEqual([]);
  });

  it("an unknown command prints the help on stderr and exits 2", async () => {
    const result = await runCli(["fetch"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("usage: onceflow-testkit prepare");
  });

  it("prepare without --help does try to fetch (so the help tests above can fail)", async () => {
    const result = await runCli(["prepare", "--kafka", "4.1.1"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/mvn|Maven/i);
  });
});
