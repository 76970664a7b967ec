// The `onceflow-eos-threads` candidate: onceflow-job.mjs's pipeline at parallelism P, each subtask
// in a worker thread of this one process (runSubtasksInThreads). The threads count their own
// records and post their counts when their sinks finished (onceflow-thread-job.mjs); this main
// thread adds them up and reports the total once the job ended (`threads.finished`: the final
// checkpoint committed) and every thread's count arrived.
// With `keyed` last, the threads run the keyed pipeline (keyed-pipeline.mjs) instead, and the mode
// is its keying: key-group (keyBy) or split (reinterpretAsKeyedStream).
//   node onceflow-threads.mjs <brokers> <input> <output> <exactly-once|at-least-once> <checkpoint dir> <prefix> <parallelism>
//   node onceflow-threads.mjs <brokers> <input> <output> <key-group|split> <checkpoint dir> <prefix> <parallelism> keyed
import { runSubtasksInThreads } from "@onceflow/core";
import { REPORT_CHANNEL } from "./onceflow-thread-job.mjs";
import { createReport, watchFirstCheckpoint } from "./report.mjs";

const [brokers, input, output, mode, directory, prefix, parallelism, pipeline = "passthrough"] =
  process.argv.slice(2);
// Worker threads get a copy of this environment when they start.
Object.assign(process.env, {
  BENCH_BROKERS: brokers,
  BENCH_INPUT: input,
  BENCH_OUTPUT: output,
  BENCH_MODE: mode,
  BENCH_CHECKPOINTS: directory,
  BENCH_PREFIX: prefix,
  BENCH_PARALLELISM: parallelism,
  BENCH_PIPELINE: pipeline,
});
const report = createReport();
const channel = new BroadcastChannel(REPORT_CHANNEL);
// One count per subtask thread, by its threadId.
const reporters = new Set();
let allReported = () => {};
const everyThread = new Promise((resolve) => {
  allReported = resolve;
});
channel.onmessage = ({ data }) => {
  if (reporters.has(data.threadId)) throw new Error(`thread ${data.threadId} reported twice`);
  reporters.add(data.threadId);
  report.absorb(data);
  if (reporters.size === Number(parallelism)) allReported();
};
// compare.mts --thread-young-generation; unset, runSubtasksInThreads' default.
const young = process.env.BENCH_THREAD_YOUNG_MB;
const threads = await runSubtasksInThreads({
  module: new URL("./onceflow-thread-job.mjs", import.meta.url),
  ...(young ? { resourceLimits: { maxYoungGenerationSizeMb: Number(young) } } : {}),
});
// Every thread checkpoints on its own: the combined status shows the laggard's last checkpoint.
watchFirstCheckpoint(() => threads.status());
await threads.finished;
await everyThread;
channel.close();
await report.doneAndWait();
