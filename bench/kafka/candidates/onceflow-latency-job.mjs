// onceflow KafkaSource → KafkaSink, exactly-once, unbounded: the pipeline of bench/kafka/latency.mts.
//   node onceflow-latency-job.mjs <brokers> <input> <output> <prefix> <interval ms> <checkpoint dir | postgresql://…>
// Checkpoints go to the filesystem, or to PostgreSQL when the last argument is a connection string.
// Prints {"event":"checkpoint"} once the first checkpoint completed (the driver then starts
// writing); when stdin closes, prints {"event":"phases", …} (the checkpoints' phases, phases.mjs),
// stops the job and exits.
import { Deserializers, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
import { createMemoryMetrics, filesystem, Job } from "@onceflow/core";
import { runUntilStdinEnds } from "./phases.mjs";

const [brokerList, input, output, prefix, interval, where] = process.argv.slice(2);
const brokers = brokerList.split(",");
const storage = where.startsWith("postgres")
  ? new PostgresCheckpointStorage({ connection: where, table: `bench_${prefix.replace(/-/g, "_")}` })
  : filesystem(where);
const metrics = createMemoryMetrics();
const job = new Job({
  jobId: `bench-${prefix}`,
  metrics,
  checkpointing: { interval: Number(interval), storage },
  restartStrategy: { type: "none" },
});
job
  .fromSource(
    new KafkaSource({
      brokers,
      topics: [input],
      startingOffsets: "earliest",
      value: Deserializers.buffer(),
      key: Deserializers.buffer(),
    }),
    { uid: "in" },
  )
  .map((record) => record.value ?? Buffer.alloc(0))
  .sinkTo(
    new KafkaSink({
      brokers,
      topic: output,
      deliveryGuarantee: "exactly-once",
      transactionalIdPrefix: prefix,
    }),
    { uid: "out" },
  );
runUntilStdinEnds(job, metrics, async () => storage.close?.());
