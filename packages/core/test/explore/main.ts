import { parseArgs } from "node:util";
import { explore } from "./exploration.js";
import { explorationFindings } from "./exploration-findings.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";
import { issueNineScenarios, runScenario } from "./issue-scenarios.js";

// `npm run explore -- [--seed <n>] [--path <p>] [--commands-path <r>] [--runs <n>] | --scenarios`: the in-memory exploration from the
// command line (the long run, or the replay of a failure that CI or a long run printed).
const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    path: { type: "string" },
    "commands-path": { type: "string" },
    runs: { type: "string" },
    "max-commands": { type: "string" },
    scenarios: { type: "boolean" },
  },
});
if (values.scenarios) {
  // The fixed operation lists: issue 9's and those the exploration found since; all must hold.
  let failed = false;
  for (const [list, scenarios] of [
    ["issue 9", issueNineScenarios],
    ["found by the exploration", explorationFindings],
  ] as const) {
    for (const scenario of scenarios) {
      const verdict = await runScenario(inMemorySinkUnderTest(), scenario);
      failed ||= !verdict.ok;
      process.stdout.write(`${verdict.ok ? "holds" : "FAILS"}  ${list}: ${scenario.name}\n`);
      for (const problem of verdict.problems) process.stdout.write(`       ${problem.slice(0, 300)}\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}
const runs = Number(values.runs ?? (values.seed === undefined ? 200 : 1));
const started = Date.now();
const result = await explore({
  target: inMemorySinkUnderTest,
  runs,
  faultyCommits: true,
  ...(values.seed === undefined ? {} : { seed: Number(values.seed) }),
  ...(values.path === undefined ? {} : { path: values.path }),
  ...(values["commands-path"] === undefined ? {} : { commandsPath: values["commands-path"] }),
  ...(values["max-commands"] === undefined ? {} : { maxCommands: Number(values["max-commands"]) }),
});
process.stdout.write(`${result.report}\n`);
process.stdout.write(`${((Date.now() - started) / 1000).toFixed(1)} s\n`);
process.exit(result.failed ? 1 : 0);
