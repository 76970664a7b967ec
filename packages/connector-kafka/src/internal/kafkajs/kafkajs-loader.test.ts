import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// A job module is imported where no client is made (the main thread of a job in worker threads), so
// importing the connector and building its sources and sinks must not load kafkajs. Node's module
// cache tells what was loaded: a real process runs a fixture against the built dist/, ESM and
// CommonJS (run `npm run build -w @onceflow/connector-kafka` first).

const fixture = fileURLToPath(new URL("./fixtures/kafkajs-on-first-use.mjs", import.meta.url));

async function kafkajsFilesLoaded(
  build: "esm" | "cjs",
): Promise<{ afterImport: number; afterBuilding: number; afterFirstUse: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, [fixture, build], { encoding: "utf8" });
  return JSON.parse(stdout) as { afterImport: number; afterBuilding: number; afterFirstUse: number };
}

describe.each(["esm", "cjs"] as const)("kafkajs is loaded on first use (%s build)", (build) => {
  it("is not loaded by importing the connector nor by building a source and sinks, and is once the source talks to Kafka", async () => {
    const loaded = await kafkajsFilesLoaded(build);
    expect(loaded.afterImport).toBe(0);
    expect(loaded.afterBuilding).toBe(0);
    // kafkajs is 143 files: the count sees it when it is loaded.
    expect(loaded.afterFirstUse).toBeGreaterThan(100);
  });
});
