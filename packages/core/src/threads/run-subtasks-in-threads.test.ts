import { describe, expect, it } from "vitest";
import { runSubtasksInThreads } from "./run-subtasks-in-threads.js";

// The threads themselves run in the built CLI's tests (cli/run-threads.test.ts); these are the
// checks made before any module is imported or thread started.
describe("runSubtasksInThreads: resourceLimits", () => {
  it("refuses a limit that is not a positive number of MiB, naming it", async () => {
    await expect(
      runSubtasksInThreads({ module: "./not-imported.js", resourceLimits: { maxOldGenerationSizeMb: 0 } }),
    ).rejects.toMatchObject({
      code: "CONFIGURATION",
      message: expect.stringMatching(
        /resourceLimits\.maxOldGenerationSizeMb: must be a number of MiB above 0, got 0/,
      ),
    });
    await expect(
      runSubtasksInThreads({
        module: "./not-imported.js",
        resourceLimits: { maxYoungGenerationSizeMb: Number.NaN },
      }),
    ).rejects.toMatchObject({ code: "CONFIGURATION" });
  });

  it("refuses a name that is not a worker thread limit, listing the ones there are", async () => {
    await expect(
      runSubtasksInThreads({
        module: "./not-imported.js",
        resourceLimits: { maxHeapSizeMb: 256 } as never,
      }),
    ).rejects.toMatchObject({
      code: "CONFIGURATION",
      message: expect.stringMatching(
        /resourceLimits\.maxHeapSizeMb: is not a worker thread limit; use maxYoungGenerationSizeMb, maxOldGenerationSizeMb, codeRangeSizeMb, stackSizeMb/,
      ),
    });
  });
});
