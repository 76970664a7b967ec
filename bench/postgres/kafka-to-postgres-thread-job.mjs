// The job of run (e) of kafka-to-postgres.ts, built in each worker thread by runSubtasksInThreads:
// KafkaSource → map to a row → PostgresSink (exactly-once, K2PG_MODE), filesystem checkpoints every
// 1000 ms, at K2PG_PARALLELISM. The settings come from the environment, which a worker thread copies
// when it starts. Each thread posts the Date.now() of its first record on FIRST_RECORD_CHANNEL.
import { KafkaSource } from "@onceflow/connector-kafka";
import { PostgresSink } from "@onceflow/connector-postgres";
import { filesystem, Job } from "@onceflow/core";

/** The channel on which each thread posts `{ firstAt }` when its first record arrives. */
export const FIRST_RECORD_CHANNEL = "onceflow-bench-k2pg-first-record";

export function createJob(launch) {
  const env = process.env;
  const job = new Job({
    jobId: env.K2PG_JOB_ID,
    parallelism: Number(env.K2PG_PARALLELISM),
    checkpointing: { interval: 1000, storage: filesystem(env.K2PG_CHECKPOINTS) },
    restartStrategy: { type: "none" },
    ...launch,
  });
  let first = true;
  job
    .fromSource(
      new KafkaSource({
        brokers: env.ONCEFLOW_KAFKA_BROKERS.split(","),
        topics: [env.K2PG_TOPIC],
        startingOffsets: "earliest",
        stoppingOffsets: "latest",
      }),
      { uid: "in" },
    )
    .map((record) => {
      if (first) {
        first = false;
        const channel = new BroadcastChannel(FIRST_RECORD_CHANNEL);
        channel.postMessage({ firstAt: Date.now() });
        channel.close();
      }
      const id = Number(record.key);
      return [id, `k${id % 10_000}`, record.value ?? ""];
    })
    .sinkTo(
      () =>
        new PostgresSink({
          connection: env.ONCEFLOW_POSTGRES_URL,
          mode: env.K2PG_MODE,
          table: env.K2PG_TABLE,
          columns: ["id", "key", "payload"],
          batchSize: 5000,
        }),
      { uid: "out" },
    );
  return job;
}
