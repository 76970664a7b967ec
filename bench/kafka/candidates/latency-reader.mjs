// A read_committed reader of bench/kafka/latency.mts: an onceflow KafkaSource (which filters aborted
// transactions the way the Java consumer does; kafkajs's consumer does not, see the connector's
// README) that notes, for each record, now minus the time its value starts with.
//   node latency-reader.mjs <brokers> <topic>
// Prints {"event":"ready"} once it reads, {"event":"first"} at its first record. A line
// `cutoff <ms since the epoch>` on stdin starts the measuring: records sent before it are counted
// but not measured. When stdin closes, prints {"event":"latencies","seen":n,"measured":m,"p50":…,
// "p90":…,"p99":…,"max":…} (ms) and exits.

import { createInterface } from "node:readline";
import { Deserializers, KafkaSource } from "@onceflow/connector-kafka";
import { Job } from "@onceflow/core";

const [brokerList, topic] = process.argv.slice(2);
const latencies = [];
let seen = 0;
let cutoff = Number.POSITIVE_INFINITY;
const job = new Job({ jobId: "latency-reader", restartStrategy: { type: "none" } });
let ready = false;
job
  .fromSource(
    new KafkaSource({
      brokers: brokerList.split(","),
      topics: [topic],
      startingOffsets: "earliest",
      readCommitted: true,
      value: Deserializers.buffer(),
    }),
    { uid: "in" },
  )
  .sinkTo({
    writeBatch(values) {
      const now = Date.now();
      if (seen === 0 && values.length > 0) process.stdout.write(`${JSON.stringify({ event: "first" })}\n`);
      seen += values.length;
      for (const record of values) {
        const sentAt = Number(record.value.subarray(0, 13).toString("latin1"));
        if (sentAt >= cutoff) latencies.push(now - sentAt);
      }
    },
    write() {},
  });
const done = job.execute();
const readyTimer = setInterval(() => {
  if (ready || job.status().state !== "running") return;
  ready = true;
  clearInterval(readyTimer);
  process.stdout.write(`${JSON.stringify({ event: "ready" })}\n`);
}, 20);
createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, value] = line.split(" ");
  if (command === "cutoff") cutoff = Number(value);
});
function percentile(sorted, p) {
  return sorted.length === 0
    ? null
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

process.stdin.on("end", async () => {
  const sorted = Float64Array.from(latencies).sort();
  const summary = {
    event: "latencies",
    seen,
    measured: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length === 0 ? null : sorted[sorted.length - 1],
  };
  job.stop();
  await done.catch(() => undefined);
  // Exits once the line is written: a pipe takes it in chunks.
  process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
});
