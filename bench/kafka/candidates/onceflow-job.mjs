// onceflow KafkaSource → map → KafkaSink, checkpoints every second on the filesystem; bounded at
// the latest offsets, so the job ends after its final checkpoint committed the last transaction.
//   node onceflow-job.mjs <brokers> <input> <output> <exactly-once|at-least-once> <checkpoint dir> <prefix>
import { Deserializers, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
import { createReport } from "./report.mjs";

const [brokerList, input, output, mode, directory, prefix] = process.argv.slice(2);
const brokers = brokerList.split(",");
const report = createReport();
const job = new Job({
  jobId: `bench-${prefix}`,
  checkpointing: { interval: 1000, storage: filesystem(directory) },
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
    }),
    { uid: "in" },
  )
  .map((record) => {
    report.processed();
    return record.value ?? Buffer.alloc(0);
  })
  .sinkTo(new KafkaSink({ brokers, topic: output, deliveryGuarantee: mode, transactionalIdPrefix: prefix }), {
    uid: "out",
  });
await job.execute();
await report.doneAndWait();
