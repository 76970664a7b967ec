// Benchmark: generator → keyBy count → discarding sink with checkpoints every second, in worker
// threads (`runSubtasksInThreads`), side by side in the same run, rounds alternating:
//   p1             — parallelism 1: one thread, no exchange;
//   p2             — parallelism 2: half the records cross the keyBy exchange to the other thread,
//                    as structured clones (the default);
//   p2-serializer  — the same with the keyBy's RecordSerializer.
// Prints records/s per candidate and each one's ratio to p1.
//
//   npm run build -w @onceflow/core -w @onceflow/connector-kafka
//   npx tsx bench/core/keyed-threads.ts --records 2000000 --rounds 3 --shape kafka
//
// `--shape kafka` (default) makes records shaped as a KafkaSource emits them (`KafkaRecord` with a
// 100-byte Buffer value, keyed by user) and p2-serializer uses `kafkaRecordSerializer()`;
// `--shape small` makes `{ key, value }` numbers, serialized as two float64s. `--work-us 2` makes the
// keyed function spend 2 µs of CPU per record (a function that does something): the work
// parallelism divides, set against what the exchange costs.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { runSubtasksInThreads } from "@onceflow/core";

const require = createRequire(import.meta.url);
const esm = (name: string) => pathToFileURL(require.resolve(name)).href.replace(/index\.cjs$/, "index.js");

type Shape = "kafka" | "small";
const CANDIDATES = { p1: [1, false], p2: [2, false], "p2-serializer": [2, true] } as const;
type Candidate = keyof typeof CANDIDATES;

const jobModule = (
  records: number,
  candidate: Candidate,
  shape: Shape,
  checkpoints: string,
  workUs: number,
): string => {
  const [parallelism, serialized] = CANDIDATES[candidate];
  return `
import { DiscardingSink, GeneratorSource, Job, filesystem } from ${JSON.stringify(esm("@onceflow/core"))};
import { kafkaRecordSerializer } from ${JSON.stringify(esm("@onceflow/connector-kafka"))};
class CountPerKey {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(_event, _context, out) {
    if (${workUs} > 0) { const until = performance.now() + ${workUs / 1000}; while (performance.now() < until); }
    const next = (this.count.value() ?? 0) + 1;
    this.count.update(next);
    out.collect(next);
  }
}
const payload = Buffer.alloc(100 * 1024, 7);
const generate = ${shape === "kafka"}
  ? (index) => ({
      topic: "clicks", partition: index % 4, offset: String(index), timestamp: 1733430000000 + index,
      key: "user-" + (index % 10000), value: payload.subarray((index % 1024) * 100, (index % 1024) * 100 + 100),
      headers: {}, headerList: [],
    })
  : (index) => ({ key: index % 10000, value: index });
const smallSerializer = {
  serialize: (event) => { const bytes = Buffer.allocUnsafe(16); bytes.writeDoubleLE(event.key, 0); bytes.writeDoubleLE(event.value, 8); return bytes; },
  deserialize: (bytes) => { const view = Buffer.from(bytes.buffer, bytes.byteOffset, 16); return { key: view.readDoubleLE(0), value: view.readDoubleLE(8) }; },
};
export function createJob(launch) {
  const job = new Job({
    jobId: "bench-keyed-threads-${candidate}",
    parallelism: ${parallelism},
    checkpointing: { interval: 1000, storage: filesystem(${JSON.stringify(checkpoints)}) },
    restartStrategy: { type: "none" },
    restore: "none",
    ...launch,
  });
  const serializer = ${serialized} ? (${shape === "kafka"} ? kafkaRecordSerializer() : smallSerializer) : undefined;
  job
    .fromSource(new GeneratorSource({ count: ${records}, splits: 4, generate }), { uid: "events" })
    .keyBy((event) => event.key, serializer === undefined ? {} : { serializer })
    .process(() => new CountPerKey(), { uid: "count" })
    .sinkTo(() => new DiscardingSink(), { uid: "discard" });
  return job;
}
`;
};

async function runOnce(
  directory: string,
  records: number,
  candidate: Candidate,
  shape: Shape,
  workUs: number,
): Promise<{ rate: number; cpuPerRecord: number }> {
  const checkpoints = await mkdtemp(join(directory, "checkpoints-"));
  const module = join(directory, `job-${candidate}-${Date.now()}.mjs`);
  await writeFile(module, jobModule(records, candidate, shape, checkpoints, workUs));
  const started = process.hrtime.bigint();
  const cpuBefore = process.cpuUsage();
  const threads = await runSubtasksInThreads({ module: pathToFileURL(module) });
  await threads.finished;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  // Every thread of this process: what the run cost whatever else the machine was doing.
  const cpu = process.cpuUsage(cpuBefore);
  await rm(checkpoints, { recursive: true, force: true });
  return { rate: records / seconds, cpuPerRecord: (cpu.user + cpu.system) / records };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      records: { type: "string" },
      rounds: { type: "string" },
      "work-us": { type: "string" },
      shape: { type: "string" },
    },
  });
  const records = Number(values.records ?? 2_000_000);
  const rounds = Number(values.rounds ?? 3);
  const workUs = Number(values["work-us"] ?? 0);
  const shape = (values.shape ?? "kafka") as Shape;
  if (shape !== "kafka" && shape !== "small") throw new Error(`--shape: kafka or small, not ${shape}`);
  const directory = await mkdtemp(join(tmpdir(), "onceflow-bench-keyed-threads-"));
  const candidates = (process.env.BENCH_ONLY?.split(",") ?? Object.keys(CANDIDATES)) as Candidate[];
  const results = new Map<Candidate, number[]>(candidates.map((candidate) => [candidate, []]));
  const cpu = new Map<Candidate, number[]>(candidates.map((candidate) => [candidate, []]));
  try {
    await runOnce(directory, Math.min(records, 200_000), "p2-serializer", shape, workUs); // warm-up
    for (let round = 1; round <= rounds; round++) {
      // Each round in another order, so that all see the same machine conditions.
      const order = candidates.map((_, index) => candidates[(index + round) % candidates.length]!);
      const line: string[] = [];
      for (const candidate of order) {
        const { rate, cpuPerRecord } = await runOnce(directory, records, candidate, shape, workUs);
        results.get(candidate)!.push(rate);
        cpu.get(candidate)!.push(cpuPerRecord);
        line.push(
          `${candidate} ${Math.round(rate).toLocaleString("en")} records/s ${cpuPerRecord.toFixed(2)} µs CPU/record`,
        );
      }
      console.log(`round ${round}: ${line.join(", ")}`);
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
  console.log(
    `\n${records.toLocaleString("en")} records per run, shape ${shape}, ${workUs} µs of work per record`,
  );
  const base = median(results.get("p1") ?? [1]);
  const baseCpu = median(cpu.get("p1") ?? [1]);
  console.log("candidate      records/s (median)  × p1   µs CPU/record  × p1   2 cores, no stalls: × p1");
  for (const candidate of candidates) {
    const rate = median(results.get(candidate)!);
    const cpuPerRecord = median(cpu.get(candidate)!);
    const [parallelism] = CANDIDATES[candidate];
    // What the run's CPU per record allows with every thread on a core of its own.
    const bound = (Math.min(parallelism, 2) * baseCpu) / cpuPerRecord;
    console.log(
      `${candidate.padEnd(14)} ${Math.round(rate).toLocaleString("en").padStart(18)}  ${(rate / base).toFixed(2).padStart(4)}   ${cpuPerRecord.toFixed(2).padStart(13)}  ${(cpuPerRecord / baseCpu).toFixed(2).padStart(4)}   ${bound.toFixed(2).padStart(5)}`,
    );
  }
}

await main();
