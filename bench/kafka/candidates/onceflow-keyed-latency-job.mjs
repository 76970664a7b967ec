// onceflow's keyed candidate of bench/kafka/latency.mts: KafkaSource → keyBy(the record's key) → a
// keyed process that counts the key's records in keyed state and passes the value on → KafkaSink
// exactly-once, unbounded, every subtask in this one process (parallelism 1, or 2 in one thread:
// then keyBy's exchange moves each record to the subtask owning its key group) — or, given a
// subtask index, that one subtask of the job in this process, keyBy's exchange going through a
// Kafka repartition topic (kafkaRepartitionExchange, records as kafkaRecordSerializer's bytes):
// onceflow-processes.mjs starts one process per subtask.
//   node onceflow-keyed-latency-job.mjs <brokers> <input> <output> <prefix> <interval ms> <checkpoint dir> [parallelism] [subtask index]
// Events as onceflow-latency-job.mjs: {"event":"checkpoint"} after the first checkpoint; when stdin
// closes, {"event":"phases", …}, then it stops the job and exits.
import {
  Deserializers,
  KafkaSink,
  KafkaSource,
  kafkaRecordSerializer,
  kafkaRepartitionExchange,
} from "@onceflow/connector-kafka";
import { createMemoryMetrics, filesystem, Job } from "@onceflow/core";
import { runUntilStdinEnds } from "./phases.mjs";

const [brokerList, input, output, prefix, interval, directory, parallelism = "1", subtask] =
  process.argv.slice(2);
const brokers = brokerList.split(",");
const metrics = createMemoryMetrics();
const job = new Job({
  jobId: `bench-${prefix}`,
  parallelism: Number(parallelism),
  ...(subtask === undefined
    ? {}
    : { subtaskIndex: Number(subtask), exchange: kafkaRepartitionExchange({ brokers }) }),
  metrics,
  checkpointing: { interval: Number(interval), storage: filesystem(directory) },
  restartStrategy: { type: "none" },
});

/** Counts each key's records (keyed state, so a checkpoint has keyed state to snapshot) and passes the value on. */
class PassOn {
  open(context) {
    this.count = context.getState({ name: "count" });
  }
  processElement(record, _context, out) {
    this.count.update((this.count.value() ?? 0) + 1);
    out.collect(record.value ?? Buffer.alloc(0));
  }
}

job
  .fromSource(
    new KafkaSource({
      brokers,
      topics: [input],
      startingOffsets: "earliest",
      key: Deserializers.string(),
      value: Deserializers.buffer(),
    }),
    { uid: "in" },
  )
  .keyBy((record) => record.key ?? "", { serializer: kafkaRecordSerializer() })
  .process(() => new PassOn(), { uid: "pass-on" })
  .sinkTo(
    () =>
      new KafkaSink({
        brokers,
        topic: output,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: prefix,
      }),
    { uid: "out" },
  );
runUntilStdinEnds(job, metrics);
