// `npm run chaos -- --kills 200 [--seed N] [--records N]`: the long chaos run, by hand.
import { parseArgs } from "node:util";
import { chaosSeed, runGeneratorToFilesChaos } from "./chaos-runner.js";

const { values } = parseArgs({
  options: {
    kills: { type: "string", default: "200" },
    seed: { type: "string" },
    records: { type: "string", default: "150000" },
    "max-delay": { type: "string", default: "1500" },
    rate: { type: "string", default: "1000" },
  },
});
const seed = values.seed === undefined ? chaosSeed() : Number(values.seed);
console.log(`chaos seed ${seed} (replay: npm run chaos -- --seed ${seed} --kills ${values.kills})`);
try {
  const report = await runGeneratorToFilesChaos({
    seed,
    kills: Number(values.kills),
    records: Number(values.records),
    maxKillDelayMs: Number(values["max-delay"]),
    recordsPerSecond: Number(values.rate),
    log: (line) => console.log(line),
  });
  console.log(`PASSED ${JSON.stringify(report)}`);
} catch (error) {
  console.error(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
