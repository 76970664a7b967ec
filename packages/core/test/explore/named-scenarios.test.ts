import { describe, expect, it } from "vitest";
import { explorationFindings } from "./exploration-findings.js";
import { fileSinkUnderTest } from "./file-sink-under-test.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";
import { namedScenarios, runScenario } from "./named-scenarios.js";

// The shortest operation lists known to break exactly-once without the restore rule and the
// late-store fence, and those the exploration found since: each must hold now, in memory and
// against the real FileSink.
describe("named scenarios of the exploration, and its later findings", () => {
  for (const scenario of [...namedScenarios, ...explorationFindings]) {
    it(`in memory: ${scenario.name}`, async () => {
      expect((await runScenario(inMemorySinkUnderTest(), scenario)).problems).toEqual([]);
    }, 30_000);

    it(`FileSink: ${scenario.name}`, async () => {
      expect((await runScenario(await fileSinkUnderTest(), scenario)).problems).toEqual([]);
    }, 30_000);
  }
});
