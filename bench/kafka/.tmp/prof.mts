import { randomUUID } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Deserializers, KafkaSink, KafkaSource, type KafkaTransaction } from "@onceflow/connector-kafka";
import { createMemoryMetrics, filesystem, Job, MetricNames } from "@onceflow/core";
import { Kafka, logLevel } from "kafkajs";
const brokers = ["127.0.0.1:39092"];
const kafka = new Kafka({ brokers, logLevel: logLevel.NOTHING });
const admin = kafka.admin(); await admin.connect();
const input = (await admin.listTopics()).find((t) => /^bench-[0-9a-f]{8}-in$/.test(t))!;
console.log("input", input);
const times: Record<string, number> = { invoke: 0, commit: 0, precommit: 0, total: 0 };
class Timed extends KafkaSink<Buffer> {
  protected override async invokeBatch(t: KafkaTransaction, v: readonly Buffer[]) { const s = performance.now(); await super.invokeBatch(t, v); times.invoke! += performance.now() - s; }
  protected override async commit(t: KafkaTransaction) { const s = performance.now(); await super.commit(t); times.commit! += performance.now() - s; }
}
for (const mode of ["at-least-once", "exactly-once"] as const) {
  for (const k of Object.keys(times)) times[k] = 0;
  const out = `prof-${randomUUID().slice(0, 6)}`;
  await admin.createTopics({ topics: [{ topic: out, numPartitions: 4 }], waitForLeaders: true });
  const metrics = createMemoryMetrics();
  const job = new Job({ jobId: `prof-${randomUUID().slice(0, 6)}`, metrics, checkpointing: { interval: 1000, storage: filesystem(await mkdtemp(join(tmpdir(), "prof-"))) }, restartStrategy: { type: "none" } });
  job.fromSource(new KafkaSource({ brokers, topics: [input], startingOffsets: "earliest", stoppingOffsets: { specific: [0, 1, 2, 3].map((partition) => ({ topic: input, partition, offset: 100000 })) }, value: Deserializers.buffer(), key: Deserializers.buffer() }), { uid: "in" })
    .map((r) => r.value ?? Buffer.alloc(0))
    .sinkTo(new Timed({ brokers, topic: out, deliveryGuarantee: mode, transactionalIdPrefix: `prof-${randomUUID()}` }), { uid: "out" });
  const s = performance.now();
  await job.execute();
  times.total = performance.now() - s;
  console.log(mode, JSON.stringify(Object.fromEntries(Object.entries(times).map(([k, v]) => [k, Math.round(v)]))), "checkpoints", metrics.observations(MetricNames.checkpointDurationMs).map(Math.round).join(","));
}
process.exit(0);
