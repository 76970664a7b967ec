import { describe, expect, it } from "vitest";
import { explorationFindings } from "./exploration-findings.js";
import { fileSinkUnderTest } from "./file-sink-under-test.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";
import { plantUnalignedSnapshots } from "./keyed-job.js";
import { keyedScenarios } from "./keyed-scenarios.js";
import { namedScenarios, runScenario } from "./named-scenarios.js";
import { startRequestScenarios, startsOver } from "./start-request-scenarios.js";

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

// Invariant 10: "none" and named checkpoints are applied once, whatever restarts follow. Starting
// over is checked per run, which only the in-memory system can tell apart.
describe("restarts after a fresh start, a named restore or a storage reset", () => {
  for (const scenario of startRequestScenarios) {
    it(`in memory: ${scenario.name}`, async () => {
      expect((await runScenario(inMemorySinkUnderTest(), scenario)).problems).toEqual([]);
    }, 30_000);

    if (!startsOver(scenario)) {
      it(`FileSink: ${scenario.name}`, async () => {
        expect((await runScenario(await fileSinkUnderTest(), scenario)).problems).toEqual([]);
      }, 30_000);
    }
  }
});

// keyBy in one process: the results (a running count and a window count per key) equal the
// reference computed from the input; with barrier alignment switched off they do not.
describe("the keyed job across the exchange: results, not only delivery", () => {
  for (const scenario of keyedScenarios) {
    it(`in memory: ${scenario.name}`, async () => {
      expect((await runScenario(inMemorySinkUnderTest(), scenario)).problems).toEqual([]);
    }, 30_000);

    it(`FileSink: ${scenario.name}`, async () => {
      expect((await runScenario(await fileSinkUnderTest(), scenario)).problems).toEqual([]);
    }, 30_000);

    it(`catches snapshots taken without alignment: ${scenario.name}`, async () => {
      const unplant = plantUnalignedSnapshots();
      try {
        const verdict = await runScenario(inMemorySinkUnderTest(), scenario);
        expect(verdict.problems.join("\n")).toMatch(/^keyed results: /);
      } finally {
        unplant();
      }
    }, 30_000);
  }
});
