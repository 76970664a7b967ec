// Benchmark: generator → map → keyBy count → discarding sink, in one process, with checkpoints every
// second and with checkpointing off, alternated in the same run. Prints records/s and the ratio.
//
//   npm run bench:core -- --records 40000000 --rounds 3
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  type Collector,
  createMemoryMetrics,
  DiscardingSink,
  filesystem,
  GeneratorSource,
  Job,
  type KeyedProcessContext,
  type KeyedProcessFunction,
  type KeyedRuntimeContext,
  MetricNames,
  type ValueState,
} from "@onceflow/core";

interface Event {
  readonly key: number;
  readonly value: number;
}

class CountPerKey implements KeyedProcessFunction<number, Event, number> {
  private count!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(_event: Event, _context: KeyedProcessContext<number>, out: Collector<number>): void {
    const next = (this.count.value() ?? 0) + 1;
    this.count.update(next);
    out.collect(next);
  }
}

async function runOnce(records: number, checkpointed: boolean, directory: string) {
  const metrics = createMemoryMetrics();
  const job = new Job({
    jobId: `bench-${checkpointed ? "checkpointed" : "unchecked"}-${Date.now()}`,
    metrics,
    checkpointing: checkpointed ? { interval: 1000, storage: filesystem(directory) } : false,
    restartStrategy: { type: "none" },
  });
  const sink = new DiscardingSink<number>();
  job
    .fromSource(
      new GeneratorSource<Event>({
        count: records,
        splits: 4,
        generate: (index) => ({ key: index % 10_000, value: index }),
      }),
      { uid: "events" },
    )
    .map((event) => ({ key: event.key, value: event.value * 2 }))
    .keyBy((event) => event.key)
    .process(new CountPerKey(), { uid: "count" })
    .sinkTo(sink, { uid: "discard" });
  const started = process.hrtime.bigint();
  await job.execute();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (sink.recordCount !== records)
    throw new Error(`expected ${records} records, the sink saw ${sink.recordCount}`);
  const durations = metrics
    .observations(MetricNames.checkpointDurationSeconds)
    .map((seconds) => seconds * 1000);
  return { recordsPerSecond: records / seconds, seconds, checkpoints: durations.length, durations };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { records: { type: "string" }, rounds: { type: "string" } } });
  const records = Number(values.records ?? 40_000_000);
  const rounds = Number(values.rounds ?? 3);
  const directory = await mkdtemp(join(tmpdir(), "onceflow-bench-"));
  const unchecked: number[] = [];
  const checkpointed: number[] = [];
  const checkpointDurations: number[] = [];
  try {
    await runOnce(Math.min(records, 1_000_000), false, directory); // warm-up: JIT, not measured
    for (let round = 1; round <= rounds; round++) {
      // Alternate so that both see the same machine conditions.
      const off = await runOnce(records, false, directory);
      const on = await runOnce(records, true, directory);
      unchecked.push(off.recordsPerSecond);
      checkpointed.push(on.recordsPerSecond);
      checkpointDurations.push(...on.durations);
      console.log(
        `round ${round}: unchecked ${Math.round(off.recordsPerSecond).toLocaleString("en")} rec/s, checkpointed ${Math.round(on.recordsPerSecond).toLocaleString("en")} rec/s (${on.checkpoints} checkpoints)`,
      );
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
  const off = median(unchecked);
  const on = median(checkpointed);
  console.log(`\nrecords per run      ${records.toLocaleString("en")}`);
  console.log(`unchecked (median)   ${Math.round(off).toLocaleString("en")} records/s`);
  console.log(`checkpointed (median) ${Math.round(on).toLocaleString("en")} records/s`);
  console.log(`ratio checkpointed / unchecked  ${(on / off).toFixed(3)}`);
  console.log(
    `checkpoint duration p50 ${median(checkpointDurations) ?? "-"} ms over ${checkpointDurations.length} checkpoints`,
  );
}

await main();
