// A job that reports every onceflow metric the Grafana dashboard of this folder charts: a generator
// with a known end (source lag), event time (watermark lag), a window (late records), a
// two-phase-commit FileSink (pending transactions, commit duration and retries). It runs for
// hours at 2,000 records/s; stop it with Ctrl-C (a final checkpoint, then exit 0).
//
//   npx onceflow run examples/grafana/metrics-job.mjs --metrics-port 9464
import {
  countAggregate,
  FileSink,
  filesystem,
  GeneratorSource,
  Job,
  TumblingEventTimeWindows,
} from "@onceflow/core";

export function createJob(launch = {}) {
  const job = new Job({
    jobId: "dashboard-sample",
    parallelism: 2,
    checkpointing: { interval: 1000, storage: filesystem(".onceflow/dashboard-sample/checkpoints") },
    ...launch,
  });
  job
    .fromSource(
      new GeneratorSource({
        count: 20_000_000,
        splits: 4,
        recordsPerSecond: 2_000,
        generate: (index) => ({ user: `u${index % 50}`, at: Date.now() }),
      }),
      { uid: "clicks", watermarks: { timestampAssigner: (click) => click.at, maxOutOfOrderness: 200 } },
    )
    .keyBy((click) => click.user)
    .window(TumblingEventTimeWindows.of(1_000))
    .aggregate(countAggregate(), (user, window, count) => ({ user, start: window.start, count }), {
      uid: "count",
    })
    .sinkTo(() => new FileSink({ directory: ".onceflow/dashboard-sample/out" }), { uid: "files" });
  return job;
}
