// The job of the `onceflow-eos-threads` candidate, built in each worker thread by
// runSubtasksInThreads (see onceflow-threads.mjs): KafkaSource → map → KafkaSink, the same as
// onceflow-job.mjs (BENCH_WORK passes of work per record too, work.mjs), at BENCH_PARALLELISM, with
// checkpoints every BENCH_CHECKPOINT_INTERVAL_MS (default 1000); with BENCH_PIPELINE=keyed, the keyed
// pipeline of keyed-pipeline.mjs instead (BENCH_MODE its keying). Each thread counts its own records
// and posts the count on a BroadcastChannel, for the main thread to add up, when its sink's input
// ended (the sink's `finish`, before the final checkpoint): a thread's `job.execute` is no end to
// wait for, since with keyBy's exchange the threads run hosted — the main thread's job coordinates
// them and no thread calls `execute` — and the sink finishes in both ways of running.
import { threadId } from "node:worker_threads";
import { Deserializers, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
import { addKeyedPipeline } from "./keyed-pipeline.mjs";
import { createReport } from "./report.mjs";
import { work, workRounds } from "./work.mjs";

/** The channel the threads' counts go to. */
export const REPORT_CHANNEL = "onceflow-bench-thread-report";

export function createJob(launch) {
  const env = process.env;
  const brokers = env.BENCH_BROKERS.split(",");
  const report = createReport();
  const rounds = workRounds();
  const job = new Job({
    jobId: `bench-${env.BENCH_PREFIX}`,
    parallelism: Number(env.BENCH_PARALLELISM),
    checkpointing: {
      interval: Number(env.BENCH_CHECKPOINT_INTERVAL_MS ?? 1000),
      storage: filesystem(env.BENCH_CHECKPOINTS),
    },
    restartStrategy: { type: "none" },
    ...launch,
  });
  // This thread's sink: a KafkaSink that posts the thread's count once its input ended.
  const Sink = reportingOnFinish(report);
  if (env.BENCH_PIPELINE === "keyed") {
    addKeyedPipeline(job, {
      brokers,
      input: env.BENCH_INPUT,
      output: env.BENCH_OUTPUT,
      prefix: env.BENCH_PREFIX,
      keying: env.BENCH_MODE,
      serializer: env.BENCH_SERIALIZER === "1",
      report,
      factory: false,
      Sink,
    });
  } else {
    job
      .fromSource(
        new KafkaSource({
          brokers,
          topics: [env.BENCH_INPUT],
          startingOffsets: "earliest",
          stoppingOffsets: "latest",
          value: Deserializers.buffer(),
          key: Deserializers.buffer(),
          // compare.mts --prefetch-bytes; unset, the source's default.
          ...(env.BENCH_PREFETCH_BYTES ? { maxPrefetchBytes: Number(env.BENCH_PREFETCH_BYTES) } : {}),
        }),
        { uid: "in" },
      )
      .map((record) => {
        report.processed();
        return work(record.value ?? Buffer.alloc(0), rounds);
      })
      .sinkTo(
        new Sink({
          brokers,
          topic: env.BENCH_OUTPUT,
          deliveryGuarantee: env.BENCH_MODE,
          transactionalIdPrefix: env.BENCH_PREFIX,
          // compare.mts --linger-ms; unset, the sink's default.
          ...(env.BENCH_LINGER_MS ? { lingerMs: Number(env.BENCH_LINGER_MS) } : {}),
        }),
        { uid: "out" },
      );
  }
  return job;
}

/**
 * A KafkaSink class whose `finish` — all input has arrived, before the final checkpoint — posts this
 * thread's count (`{ threadId, records, firstAt, lastAt }`) on REPORT_CHANNEL. The subtask's sink
 * finishes only after every record this thread's source read went through its `map` (the sink's
 * inputs end after the thread's own source and, with keyBy, after every thread's), so the count is
 * final; the main thread's coordinating job builds a sink too but never runs it.
 */
function reportingOnFinish(report) {
  return class ReportingKafkaSink extends KafkaSink {
    async finish() {
      await super.finish();
      const channel = new BroadcastChannel(REPORT_CHANNEL);
      channel.postMessage({ threadId, ...report.snapshot() });
      channel.close();
    }
  };
}
