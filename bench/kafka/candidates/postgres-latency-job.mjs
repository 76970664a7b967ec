// onceflow Kafka → PostgreSQL, exactly-once, unbounded: the PostgreSQL candidates of
// bench/kafka/latency.mts. KafkaSource → map to a row (the send time the value starts with, the
// value) → PostgresSink in prepared or staging mode (each with its default for background commits),
// checkpoints every <interval ms> on the filesystem.
//   node postgres-latency-job.mjs <brokers> <input> <postgresql://…> <table> <prepared|staging> <interval ms> <checkpoint dir> <prefix>
// The table is `(seq bigserial, sent_at bigint, payload text)`; the sink writes sent_at and payload,
// so seq numbers the rows in the order they were written to the table (one sink subtask: the order
// its checkpoints commit in). Events as onceflow-latency-job.mjs.
import { Deserializers, KafkaSource } from "@onceflow/connector-kafka";
import { PostgresSink } from "@onceflow/connector-postgres";
import { createMemoryMetrics, filesystem, Job } from "@onceflow/core";
import { runUntilStdinEnds } from "./phases.mjs";

const [brokerList, input, connection, table, mode, interval, directory, prefix] = process.argv.slice(2);
const metrics = createMemoryMetrics();
const job = new Job({
  jobId: `bench-${prefix}`,
  metrics,
  checkpointing: { interval: Number(interval), storage: filesystem(directory) },
  restartStrategy: { type: "none" },
});
job
  .fromSource(
    new KafkaSource({
      brokers: brokerList.split(","),
      topics: [input],
      startingOffsets: "earliest",
      value: Deserializers.string(),
    }),
    { uid: "in" },
  )
  .map((record) => {
    const value = record.value ?? "";
    return [Number(value.slice(0, 13)), value];
  })
  .sinkTo(
    () => new PostgresSink({ connection, mode, table, columns: ["sent_at", "payload"], batchSize: 5000 }),
    {
      uid: "out",
    },
  );
runUntilStdinEnds(job, metrics);
