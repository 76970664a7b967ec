// onceflow KafkaSource → map → KafkaSink, checkpoints every second on the filesystem; bounded at
// the latest offsets, so the job ends after its final checkpoint committed the last transaction.
//   node onceflow-job.mjs <brokers> <input> <output> <exactly-once|at-least-once> <checkpoint dir> <prefix> [parallelism]
// With a parallelism above 1 every subtask runs in this one thread. BENCH_WORK=<n> in the
// environment gives the map n passes of CPU work per record (work.mjs); BENCH_CHECKPOINT_INTERVAL_MS
// the checkpoint interval (default 1000). The checkpoints' phases are printed to stderr at the end.
import { Deserializers, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { createMemoryMetrics, filesystem, Job } from "@onceflow/core";
import { formatPhaseSummary, phaseSummary } from "./phases.mjs";
import { createReport, watchFirstCheckpoint } from "./report.mjs";
import { work, workRounds } from "./work.mjs";

const [brokerList, input, output, mode, directory, prefix, parallelism = "1"] = process.argv.slice(2);
const brokers = brokerList.split(",");
const report = createReport();
const rounds = workRounds();
const metrics = createMemoryMetrics();
const job = new Job({
  jobId: `bench-${prefix}`,
  parallelism: Number(parallelism),
  metrics,
  checkpointing: {
    interval: Number(process.env.BENCH_CHECKPOINT_INTERVAL_MS ?? 1000),
    storage: filesystem(directory),
  },
  restartStrategy: { type: "none" },
});
job
  .fromSource(
    new KafkaSource({
      brokers,
      topics: [input],
      startingOffsets: "earliest",
      stoppingOffsets: "latest",
      value: Deserializers.buffer(),
      key: Deserializers.buffer(),
      // compare.mts --prefetch-bytes; unset, the source's default.
      ...(process.env.BENCH_PREFETCH_BYTES
        ? { maxPrefetchBytes: Number(process.env.BENCH_PREFETCH_BYTES) }
        : {}),
    }),
    { uid: "in" },
  )
  .map((record) => {
    report.processed();
    return work(record.value ?? Buffer.alloc(0), rounds);
  })
  // A factory: each subtask gets its own sink instance (required at parallelism above 1).
  .sinkTo(
    () =>
      new KafkaSink({
        brokers,
        topic: output,
        deliveryGuarantee: mode,
        transactionalIdPrefix: prefix,
        // compare.mts --linger-ms; unset, the sink's default.
        ...(process.env.BENCH_LINGER_MS ? { lingerMs: Number(process.env.BENCH_LINGER_MS) } : {}),
      }),
    {
      uid: "out",
    },
  );
watchFirstCheckpoint(() => job.status());
await job.execute();
process.stderr.write(`${formatPhaseSummary(phaseSummary(metrics))}\n`);
await report.doneAndWait();
