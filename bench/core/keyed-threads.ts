// Benchmark: generator → map → keyBy count → discarding sink with checkpoints every second, in
// worker threads (`runSubtasksInThreads`) at parallelism 1 and 2, alternated in the same run. At
// parallelism 2 the records cross the keyBy exchange between the two threads (half of them go to
// the other thread's keyed stage through a bounded channel). Prints records/s and the ratio.
//
//   npm run build -w @onceflow/core && npx tsx bench/core/keyed-threads.ts --records 10000000 --rounds 3
//
// `--work-us 2` makes the keyed function spend 2 µs of CPU per record (a function that does
// something), so that the cost of the exchange is set against work that parallelism divides.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { runSubtasksInThreads } from "@onceflow/core";

const core = pathToFileURL(createRequire(import.meta.url).resolve("@onceflow/core")).href.replace(
  /index\.cjs$/,
  "index.js",
);

const jobModule = (records: number, parallelism: number, checkpoints: string, workUs: number): string => `
import { DiscardingSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(core)};
class CountPerKey {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(_event, _context, out) {
    if (${workUs} > 0) { const until = performance.now() + ${workUs / 1000}; while (performance.now() < until); }
    const next = (this.count.value() ?? 0) + 1;
    this.count.update(next);
    out.collect(next);
  }
}
export function createJob(launch) {
  const job = new Job({
    jobId: "bench-keyed-threads-${parallelism}",
    parallelism: ${parallelism},
    checkpointing: { interval: 1000, storage: filesystem(${JSON.stringify(checkpoints)}) },
    restartStrategy: { type: "none" },
    restore: "none",
    ...launch,
  });
  job
    .fromSource(new GeneratorSource({ count: ${records}, splits: 4, generate: (index) => ({ key: index % 10_000, value: index }) }), { uid: "events" })
    .map((event) => ({ key: event.key, value: event.value * 2 }))
    .keyBy((event) => event.key)
    .process(() => new CountPerKey(), { uid: "count" })
    .sinkTo(() => new DiscardingSink(), { uid: "discard" });
  return job;
}
`;

async function runOnce(
  directory: string,
  records: number,
  parallelism: number,
  workUs: number,
): Promise<number> {
  const checkpoints = await mkdtemp(join(directory, "checkpoints-"));
  const module = join(directory, `job-${parallelism}-${Date.now()}.mjs`);
  await writeFile(module, jobModule(records, parallelism, checkpoints, workUs));
  const started = process.hrtime.bigint();
  const threads = await runSubtasksInThreads({ module: pathToFileURL(module) });
  await threads.finished;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await rm(checkpoints, { recursive: true, force: true });
  return records / seconds;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { records: { type: "string" }, rounds: { type: "string" }, "work-us": { type: "string" } },
  });
  const records = Number(values.records ?? 10_000_000);
  const rounds = Number(values.rounds ?? 3);
  const workUs = Number(values["work-us"] ?? 0);
  const directory = await mkdtemp(join(tmpdir(), "onceflow-bench-keyed-threads-"));
  const one: number[] = [];
  const two: number[] = [];
  try {
    await runOnce(directory, Math.min(records, 500_000), 2, workUs); // warm-up, not measured
    for (let round = 1; round <= rounds; round++) {
      // Alternated, so that both see the same machine conditions.
      one.push(await runOnce(directory, records, 1, workUs));
      two.push(await runOnce(directory, records, 2, workUs));
      console.log(
        `round ${round}: parallelism 1 ${Math.round(one.at(-1)!).toLocaleString("en")} rec/s, parallelism 2 ${Math.round(two.at(-1)!).toLocaleString("en")} rec/s`,
      );
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
  console.log(`\nrecords per run           ${records.toLocaleString("en")}, ${workUs} µs of work per record`);
  console.log(`parallelism 1 (median)    ${Math.round(median(one)).toLocaleString("en")} records/s`);
  console.log(`parallelism 2 (median)    ${Math.round(median(two)).toLocaleString("en")} records/s`);
  console.log(`ratio 2 / 1               ${(median(two) / median(one)).toFixed(2)}`);
}

await main();
