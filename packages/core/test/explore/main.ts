import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { explore } from "./exploration.js";
import { explorationFindings } from "./exploration-findings.js";
import { inMemorySinkUnderTest } from "./in-memory-sink-under-test.js";
import { plantUnalignedSnapshots } from "./keyed-job.js";
import { keyedScenarios } from "./keyed-scenarios.js";
import { namedScenarios, runScenario } from "./named-scenarios.js";
import { startRequestScenarios } from "./start-request-scenarios.js";

// `npm run explore -- [--keyed [--unaligned]] [--seed <n>] [--path <p>] [--commands-path <r>] [--runs <n>] [--workers <n>] | --scenarios`:
// the in-memory exploration from the command line (the long run, or the replay of a failure that CI
// or a long run printed). `--keyed` explores the keyed job (keyBy in one process, its results checked);
// `--unaligned` plants barrier alignment switched off, which the exploration must catch.
const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    path: { type: "string" },
    "commands-path": { type: "string" },
    runs: { type: "string" },
    workers: { type: "string" },
    "max-commands": { type: "string" },
    scenarios: { type: "boolean" },
    keyed: { type: "boolean" },
    unaligned: { type: "boolean" },
  },
});
if (values.unaligned) plantUnalignedSnapshots();
if (values.scenarios) {
  // The fixed operation lists: the named scenarios and those the exploration found since; all must hold.
  let failed = false;
  for (const [list, scenarios] of [
    ["named scenario", namedScenarios],
    ["found by the exploration", explorationFindings],
    ["restarts after a fresh start, a named restore or a storage reset", startRequestScenarios],
    ["keyed job", keyedScenarios],
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
const workers = Number(values.workers ?? 1);
if (!Number.isInteger(workers) || workers < 1)
  throw new Error(`--workers must be a positive integer, got ${values.workers}`);
if (workers > 1 && values.path !== undefined) throw new Error("--path replays one case: leave out --workers");
const started = Date.now();
const failed = workers === 1 ? await exploreHere() : await exploreInWorkers();
process.stdout.write(`${((Date.now() - started) / 1000).toFixed(1)} s\n`);
process.exit(failed ? 1 : 0);

async function exploreHere(): Promise<boolean> {
  const result = await explore({
    target: inMemorySinkUnderTest,
    runs,
    faultyCommits: true,
    // The keyed job's results are checked over one run: no fresh starts (the output would start over).
    freshStarts: values.keyed !== true,
    keyed: values.keyed === true,
    ...(values.seed === undefined ? {} : { seed: Number(values.seed) }),
    ...(values.path === undefined ? {} : { path: values.path }),
    ...(values["commands-path"] === undefined ? {} : { commandsPath: values["commands-path"] }),
    ...(values["max-commands"] === undefined ? {} : { maxCommands: Number(values["max-commands"]) }),
  });
  process.stdout.write(`${result.report}\n`);
  return result.failed;
}

// A case spends most of its time waiting on the model's real timers (the checkpoint timeout, restart
// delays, settling waits), not on the CPU: the long run splits its cases over worker processes, each
// exploring its own seed (base, base + 1, …), so a failure's report replays in one process as printed.
async function exploreInWorkers(): Promise<boolean> {
  const base =
    values.seed === undefined ? (Date.now() ^ (Math.random() * 0x1_0000_0000)) >>> 0 : Number(values.seed);
  const script = fileURLToPath(import.meta.url);
  const children = Array.from({ length: workers }, (_, index) => {
    const share = Math.floor(runs / workers) + (index < runs % workers ? 1 : 0);
    const args = ["--seed", String(base + index), "--runs", String(share)];
    if (values["max-commands"] !== undefined) args.push("--max-commands", values["max-commands"]);
    if (values.keyed) args.push("--keyed");
    if (values.unaligned) args.push("--unaligned");
    const child = fork(script, args, { stdio: ["ignore", "pipe", "inherit", "ipc"] });
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    return new Promise<{ index: number; code: number | null; output: string }>((resolve) =>
      child.on("exit", (code) => resolve({ index, code, output })),
    );
  });
  process.stdout.write(`${runs} case(s) over ${workers} workers, seeds ${base}…${base + workers - 1}\n`);
  let failed = false;
  for (const result of await Promise.all(children)) {
    failed ||= result.code !== 0;
    process.stdout.write(`worker ${result.index} (seed ${base + result.index}): ${result.output.trim()}\n`);
  }
  process.stdout.write(failed ? "FAILED: see the worker's report above\n" : `${runs} case(s) passed\n`);
  return failed;
}
