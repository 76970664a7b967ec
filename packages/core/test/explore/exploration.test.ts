import { describe, expect, it } from "vitest";
import { explorationFromEnvironment, explore } from "./exploration.js";
import { fileSinkUnderTest } from "./file-sink-under-test.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";

// CI's fixed budget. A failure prints the shrunk operation list and the command that replays it
// (EXPLORE_SEED, EXPLORE_PATH, EXPLORE_COMMANDS_PATH); EXPLORE_SEED alone explores another seed.
const file = "packages/core/test/explore/exploration.test.ts";
const replay = explorationFromEnvironment(20_261_130);

describe("exploring the checkpoint protocol's interleavings", () => {
  it("in-memory transactional system: the committed output is the input exactly once, nothing stays prepared", async () => {
    const result = await explore({
      target: inMemorySinkUnderTest,
      runs: 200,
      ...replay,
      replayFile: `${file} -t in-memory`,
      faultyCommits: true,
      freshStarts: true,
      timeLimitMs: 60_000,
    });
    expect(result.failed, result.report).toBe(false);
  }, 150_000);

  it("keyBy in one process, in memory: the running count and the window count per key equal the reference", async () => {
    const result = await explore({
      target: inMemorySinkUnderTest,
      runs: 40,
      ...replay,
      replayFile: `${file} -t keyBy`,
      keyed: true,
      faultyCommits: true,
      timeLimitMs: 20_000,
    });
    expect(result.failed, result.report).toBe(false);
  }, 90_000);

  it("FileSink: the committed files hold the input exactly once, no staging file is left", async () => {
    const result = await explore({
      target: fileSinkUnderTest,
      runs: 30,
      ...replay,
      replayFile: `${file} -t FileSink`,
      timeLimitMs: 30_000,
    });
    expect(result.failed, result.report).toBe(false);
  }, 90_000);
});
