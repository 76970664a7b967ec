import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// A job module is imported where no connection is made (the main thread of a job in worker
// threads), so importing the connector and building its sink and checkpoint storage must not load
// pg. Node's module cache tells what was loaded: a real process runs a fixture against the built
// dist/, ESM and CommonJS (run `npm run build -w @onceflow/connector-postgres` first).

const fixture = fileURLToPath(new URL("./fixtures/pg-on-first-use.mjs", import.meta.url));

interface Loaded {
  afterImport: number;
  afterBuilding: number;
  afterFirstUse: number;
  description: string;
  max: number;
}

async function pgFilesLoaded(build: "esm" | "cjs"): Promise<Loaded> {
  const { stdout } = await promisify(execFile)(process.execPath, [fixture, build], { encoding: "utf8" });
  return JSON.parse(stdout) as Loaded;
}

describe.each(["esm", "cjs"] as const)("pg is loaded on first use (%s build)", (build) => {
  it("is not loaded by importing the connector nor by building a sink and a checkpoint storage, and is once the pool is used", async () => {
    const loaded = await pgFilesLoaded(build);
    expect(loaded.afterImport).toBe(0);
    expect(loaded.afterBuilding).toBe(0);
    // pg, pg-pool, pg-protocol, pg-types …: the count sees them when they are loaded.
    expect(loaded.afterFirstUse).toBeGreaterThan(20);
    // The storage still names its server and tables before a pool exists, and the pool gets the
    // connector's default size.
    expect(loaded.description).toBe('postgres:127.0.0.1:1/none/we"ird.onceflow_checkpoints');
    expect(loaded.max).toBe(4);
  });
});
