// onceflow's keyed candidate of bench/kafka/compare.mts: Kafka → keyBy(user) → 1 s tumbling
// event-time window count → Kafka, exactly-once (keyed-pipeline.mjs), checkpoints every second on
// the filesystem, bounded at the latest offsets; every subtask in this one thread.
//   node onceflow-keyed-job.mjs <brokers> <input> <output> <key-group|split> <checkpoint dir> <prefix> [parallelism]
import { filesystem, Job } from "@onceflow/core";
import { addKeyedPipeline } from "./keyed-pipeline.mjs";
import { createReport, watchFirstCheckpoint } from "./report.mjs";

const [brokerList, input, output, keying, directory, prefix, parallelism = "1"] = process.argv.slice(2);
const report = createReport();
const job = new Job({
  jobId: `bench-${prefix}`,
  parallelism: Number(parallelism),
  checkpointing: { interval: 1000, storage: filesystem(directory) },
  restartStrategy: { type: "none" },
});
addKeyedPipeline(job, { brokers: brokerList.split(","), input, output, prefix, keying, report });
watchFirstCheckpoint(() => job.status());
await job.execute();
await report.doneAndWait();
