import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
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
});
