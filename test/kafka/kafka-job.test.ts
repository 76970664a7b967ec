import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, produce, readAll, uniqueName, withAdmin } from "./helpers/kafka.js";

describe("Kafka → Kafka job", { timeout: 120_000 }, () => {
  it("bounded exactly-once job: every input once in the output, offsets committed to the group at the end", async () => {
    const input = await createTopic(uniqueName("job-in"), 4);
    const output = await createTopic(uniqueName("job-out"), 2);
    const inputs = Array.from({ length: 2000 }, (_, i) => `m${i}`);
    for (let p = 0; p < 4; p++) {
      await produce(
        input,
        inputs.filter((_, i) => i % 4 === p).map((value) => ({ value, partition: p })),
      );
    }
    const groupId = uniqueName("job-group");
    const dir = await mkdtemp(join(tmpdir(), "onceflow-kafka-job-"));
    try {
      const job = new Job({
        jobId: uniqueName("k2k"),
        parallelism: 2,
        checkpointing: { interval: 200, storage: filesystem(dir) },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(
          new KafkaSource({
            brokers: kafkaBrokers(),
            topics: [input],
            groupId,
            startingOffsets: "earliest",
            stoppingOffsets: "latest",
            maxBatchSize: 100,
          }),
          { uid: "in" },
        )
        .map((record) => `${record.value}!`)
        .sinkTo(
          () =>
            new KafkaSink<string>({
              brokers: kafkaBrokers(),
              topic: output,
              deliveryGuarantee: "exactly-once",
              transactionalIdPrefix: uniqueName("job-out"),
            }),
          { uid: "out" },
        );
      const result = await job.execute();
      expect(result.endedBy).toBe("end-of-input");
      const records = await readAll(output, { expected: inputs.length, timeoutMs: 30_000 });
      expect(records.length).toBe(inputs.length);
      expect(new Set(records.map((r) => r.value))).toEqual(new Set(inputs.map((v) => `${v}!`)));
      const committed = await withAdmin(
        async (admin) => (await admin.fetchOffsets({ groupId, topics: [input] }))[0],
      );
      expect(committed?.partitions.map((p) => p.offset).sort()).toEqual(["500", "500", "500", "500"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an attempt whose sink recovery fails (no broker answers) is restarted: the next attempt's sink takes the prefix over", async () => {
    const input = await createTopic(uniqueName("job-claim-in"), 1);
    const output = await createTopic(uniqueName("job-claim-out"), 1);
    const inputs = Array.from({ length: 200 }, (_, i) => `c${i}`);
    await produce(
      input,
      inputs.map((value) => ({ value })),
    );
    const prefix = uniqueName("job-claim");
    // The first attempt's sink reaches no broker, as when the broker is killed while the attempt
    // recovers: "finishing the recovery of transactions failed" (RecoveryError), and the runtime
    // never closes that sink. Every later attempt gets a working one.
    let created = 0;
    const unreachable = new Kafka({
      brokers: ["127.0.0.1:1"],
      clientId: "job-claim",
      logLevel: logLevel.NOTHING,
      connectionTimeout: 300,
      retry: { retries: 0 },
    });
    const dir = await mkdtemp(join(tmpdir(), "onceflow-kafka-job-claim-"));
    try {
      const job = new Job({
        jobId: uniqueName("claim"),
        parallelism: 1,
        checkpointing: { interval: 200, storage: filesystem(dir) },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
      });
      job
        .fromSource(
          new KafkaSource({
            brokers: kafkaBrokers(),
            topics: [input],
            startingOffsets: "earliest",
            stoppingOffsets: "latest",
          }),
          { uid: "in" },
        )
        .map((record) => String(record.value))
        .sinkTo(
          () =>
            new KafkaSink<string>({
              ...(created++ === 0 ? { kafka: unreachable } : { brokers: kafkaBrokers() }),
              topic: output,
              deliveryGuarantee: "exactly-once",
              transactionalIdPrefix: prefix,
            }),
          { uid: "out" },
        );
      const result = await job.execute();
      expect(result.endedBy).toBe("end-of-input");
      expect(created).toBeGreaterThanOrEqual(2);
      const records = await readAll(output, { expected: inputs.length, timeoutMs: 30_000 });
      expect(records.map((r) => r.value).sort()).toEqual([...inputs].sort());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
