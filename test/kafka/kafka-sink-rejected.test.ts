import { KafkaRecordRejectedError, KafkaSink } from "@onceflow/connector-kafka";
import { createMemoryMetrics, GeneratorSource, Job, MetricNames } from "@onceflow/core";
import { createKafkaTopic } from "@onceflow/testkit";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { kafkaBrokers, readAll, uniqueName } from "./helpers/kafka.js";

/** A topic that refuses records over 2,000 bytes. */
async function smallRecordTopic(): Promise<string> {
  const topic = uniqueName("sink-rejected");
  await createKafkaTopic(kafkaBrokers(), topic, { partitions: 1, config: { "max.message.bytes": "2000" } });
  return topic;
}

const causes = (error: unknown): unknown[] => {
  const chain: unknown[] = [];
  for (let current = error; current instanceof Error; current = current.cause) chain.push(current);
  return chain;
};

describe("KafkaSink: records the broker refuses for good", { timeout: 120_000 }, () => {
  for (const guarantee of ["exactly-once", "at-least-once"] as const) {
    it(`${guarantee}: a record over the topic's max.message.bytes fails with RECORD_REJECTED naming the topic`, async () => {
      const topic = await smallRecordTopic();
      const driver = await SinkDriver.start(
        new KafkaSink<string>({
          brokers: kafkaBrokers(),
          topic,
          deliveryGuarantee: guarantee,
          transactionalIdPrefix: uniqueName("rejected"),
        }),
      );
      try {
        // Exactly-once sends are acknowledged by the checkpoint (pre-commit) at the latest.
        const failure = await driver
          .write(["small", "x".repeat(5000)])
          .then(() => driver.checkpoint(1))
          .catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(KafkaRecordRejectedError);
        const rejected = failure as KafkaRecordRejectedError;
        expect(rejected.code).toBe("RECORD_REJECTED");
        expect(rejected.details).toMatchObject({ topic, brokerError: "MESSAGE_TOO_LARGE", records: 2 });
        expect(rejected.details.largestRecordBytes).toBe(5000);
        expect(rejected.message).toContain(`topic '${topic}'`);
        expect(rejected.message).toContain("max.message.bytes");
      } finally {
        await driver.close();
      }
    });
  }

  it("stops the job at once (no restart loop) and commits nothing of the refused checkpoint", async () => {
    const topic = await smallRecordTopic();
    const metrics = createMemoryMetrics();
    const job = new Job({
      jobId: uniqueName("rejected-job"),
      metrics,
      checkpointing: { interval: 100 },
      // A retriable failure would be retried 5 times; a permanent one stops the first attempt.
      restartStrategy: { type: "fixed-delay", attempts: 5, delay: 10 },
    });
    job
      .fromSource(
        new GeneratorSource({ count: 20, generate: (i) => (i === 10 ? "y".repeat(5000) : `r${i}`) }),
        {
          uid: "in",
        },
      )
      .sinkTo(
        () =>
          new KafkaSink<string>({
            brokers: kafkaBrokers(),
            topic,
            deliveryGuarantee: "exactly-once",
            transactionalIdPrefix: uniqueName("rejected-job"),
          }),
        { uid: "out" },
      );
    const failure = await job.execute().catch((error: unknown) => error);
    expect(causes(failure).some((cause) => cause instanceof KafkaRecordRejectedError)).toBe(true);
    expect(metrics.read(MetricNames.restarts)).toBe(0);
    // Whatever the broker got of the refused transaction was aborted: no record 10, no duplicates.
    const values = (await readAll(topic, { timeoutMs: 3000 })).map((record) => record.value);
    expect(values).not.toContain("y".repeat(5000));
    expect(new Set(values).size).toBe(values.length);
  });
});
