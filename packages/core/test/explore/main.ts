import { parseArgs } from "node:util";
import { explore } from "./exploration.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";

// `npm run explore -- [--seed <n>] [--path <p>] [--runs <n>]`: the in-memory exploration from the
// command line (the long run, or the replay of a failure that CI or a long run printed).
const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    path: { type: "string" },
    runs: { type: "string" },
    "max-commands": { type: "string" },
  },
});
const runs = Number(values.runs ?? (values.seed === undefined ? 200 : 1));
const started = Date.now();
const result = await explore({
  target: inMemorySinkUnderTest,
  runs,
  faultyCommits: true,
  ...(values.seed === undefined ? {} : { seed: Number(values.seed) }),
  ...(values.path === undefined ? {} : { path: values.path }),
  ...(values["max-commands"] === undefined ? {} : { maxCommands: Number(values["max-commands"]) }),
});
console.log(result.report);
console.log(`${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(result.failed ? 1 : 0);
