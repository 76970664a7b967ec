import { describe, expect, it } from "vitest";
import { explore } from "./exploration.js";
import { fileSinkUnderTest } from "./file-sink-under-test.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";

// CI's fixed budget. A failure prints the shrunk operation list and the seed: replay it with
// `npm run explore -- --seed <n> --path <p>`. EXPLORE_SEED picks another seed for a local run.
const seed = Number(process.env.EXPLORE_SEED ?? 20_261_130);

describe("exploring the checkpoint protocol's interleavings", () => {
  it("in-memory transactional system: the committed output is the input exactly once, nothing stays prepared", async () => {
    const result = await explore({ target: inMemorySinkUnderTest, runs: 200, seed, faultyCommits: true, timeLimitMs: 60_000 });
    expect(result.failed, result.report).toBe(false);
  }, 150_000);

  it("FileSink: the committed files hold the input exactly once, no staging file is left", async () => {
    const result = await explore({ target: fileSinkUnderTest, runs: 30, seed, timeLimitMs: 30_000 });
    expect(result.failed, result.report).toBe(false);
  }, 90_000);
});
