// One process per subtask for a candidate of bench/kafka/latency.mts: starts
// onceflow-keyed-latency-job.mjs once per subtask index with the same arguments (the job's
// parallelism last but one, the index last), passes their output on — {"event":"checkpoint"} once
// every subtask has completed a checkpoint, {"event":"phases"} of subtask 0 — and, when stdin
// closes, closes theirs and waits for them.
//   node onceflow-processes.mjs <parallelism> <brokers> <input> <output> <prefix> <interval ms> <checkpoint dir>
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const [parallelism, ...jobArguments] = process.argv.slice(2);
const job = join(fileURLToPath(new URL(".", import.meta.url)), "onceflow-keyed-latency-job.mjs");
let checkpointed = 0;
const children = Array.from({ length: Number(parallelism) }, (_, subtask) => {
  const child = spawn(process.execPath, [job, ...jobArguments, parallelism, String(subtask)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  createInterface({ input: child.stdout }).on("line", (line) => {
    const event = JSON.parse(line).event;
    if (event === "checkpoint" && ++checkpointed === children.length) process.stdout.write(`${line}\n`);
    if (event === "phases" && subtask === 0) process.stdout.write(`${line}\n`);
  });
  return child;
});
process.stdin.resume();
process.stdin.on("end", async () => {
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          child.once("exit", resolve);
          child.stdin.end();
        }),
    ),
  );
  process.exit(0);
});
