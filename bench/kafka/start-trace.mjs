// Where a onceflow Kafka job's start goes (start to first checkpoint): preload it into a candidate and it
// prints, on stderr, a timeline in ms since the process started (performance.timeOrigin) — module
// load, the job's start, restore, each subtask's creation, every Kafka request (connect, Metadata,
// InitProducerId, ListOffsets, the first fetches...), the first batches, the checkpoints' snapshots
// and stores, the job's own log lines ("checkpoint completed" with its duration), and the event
// loop's turns of 10 ms or more in its first two seconds (when each ended, how long it lasted).
//   node --import ./bench/kafka/start-trace.mjs bench/kafka/candidates/onceflow-job.mjs \
//     <brokers> <input> <output> exactly-once <checkpoint dir> <prefix> 2 </dev/null
// or with the subtasks in worker threads (each thread's lines say which):
//   node --import ./bench/kafka/start-trace.mjs bench/kafka/candidates/onceflow-threads.mjs \
//     <brokers> <input> <output> exactly-once <checkpoint dir> <prefix> 2 </dev/null
// It wraps kafkajs's Connection and the prototypes of the exported classes: a diagnostic, never
// for a measured run.
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { isMainThread, threadId } from "node:worker_threads";
import { KafkaSource, KafkaSourceReader } from "@onceflow/connector-kafka";
import { FileSystemCheckpointStorage, Job, TwoPhaseCommitSink } from "@onceflow/core";

// Worker threads (onceflow-threads.mjs) load this preload too (they inherit the process's
// execArgv) and have a clock of their own: every line is timed from the process's start, whose
// origin the main thread hands down in the environment, and says which thread wrote it.
process.env.START_TRACE_ORIGIN ??= String(performance.timeOrigin);
const origin = Number(process.env.START_TRACE_ORIGIN);
const at = () => (performance.timeOrigin + performance.now() - origin).toFixed(0).padStart(6);
const thread = isMainThread ? "" : ` thread ${threadId}`;
const log = (what) => process.stderr.write(`[start-trace ${at()}${thread}] ${what}\n`);
const since = (started) => `${(performance.now() - started).toFixed(0)} ms`;
log("modules loaded");

/** Logs when `proto[name]` is called and when what it returned settled, the first `times` calls. */
function trace(proto, name, label, times = 4) {
  const original = proto[name];
  let calls = 0;
  proto[name] = function (...args) {
    if (calls++ >= times) return original.apply(this, args);
    const started = performance.now();
    log(`${label} start`);
    const result = original.apply(this, args);
    Promise.resolve(result).then(
      () => log(`${label} end ${since(started)}`),
      () => log(`${label} failed ${since(started)}`),
    );
    return result;
  };
}

// Every Kafka request and connection goes through kafkajs's Connection.
const Connection = createRequire(import.meta.url)("kafkajs/src/network/connection.js");
let requests = 0;
for (const name of ["connect", "send"]) {
  const original = Connection.prototype[name];
  Connection.prototype[name] = async function (...args) {
    const started = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      if (requests++ < 150) log(`${name === "send" ? args[0].request.apiName : "connect"} ${since(started)}`);
    }
  };
}
trace(Job.prototype, "planRestore", "restore plan");
trace(Job.prototype, "createSubtask", "subtask creation");
trace(KafkaSource.prototype, "discoverSplits", "source: discover partitions");
trace(KafkaSourceReader.prototype, "addSplits", "source: start offsets");
trace(TwoPhaseCommitSink.prototype, "initializeState", "sink: recover and clean up");
trace(TwoPhaseCommitSink.prototype, "snapshotState", "sink: snapshot");
trace(FileSystemCheckpointStorage.prototype, "store", "checkpoint store");
let batches = 0;
const pollNext = KafkaSourceReader.prototype.pollNext;
KafkaSourceReader.prototype.pollNext = async function () {
  const batch = await pollNext.call(this);
  if (batch !== undefined && batches++ < 2) log(`source: a first batch (${batch.records.length} records)`);
  return batch;
};
// The job's own log lines, info and up.
const line = (level) => (first, message) =>
  log(`${level}: ${typeof first === "string" ? first : `${message} ${JSON.stringify(first)}`}`);
const logger = { debug() {}, info: line("info"), warn: line("warn"), error: line("error") };
logger.child = () => logger;
const execute = Job.prototype.execute;
Job.prototype.execute = function () {
  log("job start");
  this.logger = logger;
  return execute.call(this);
};

// Long turns of this thread's event loop over its first two seconds: every awaited I/O step (a
// file operation of a store, a request's response) waits for the turn in progress to end.
const turns = [];
let turnStarted = performance.now();
const probe = () => {
  const now = performance.now();
  if (now - turnStarted >= 10) turns.push(`${at().trim()}+${(now - turnStarted).toFixed(0)}`);
  turnStarted = now;
  if (now < 2000) setImmediate(probe);
  else log(`event-loop turns of 10 ms or more (ended at + lasted, ms): ${turns.join(" ") || "none"}`);
};
setImmediate(probe);
