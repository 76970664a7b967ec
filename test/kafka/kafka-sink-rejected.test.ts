import { KafkaRecordRejectedError, KafkaSink } from "@onceflow/connector-kafka";
import { createMemoryMetrics, GeneratorSource, Job, MetricNames } from "@onceflow/core";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
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
        // Sends are acknowledged by the checkpoint (pre-commit) at the latest.
        const failure = await driver
          .write(["small", "x".repeat(5000)])
          .then(() => driver.checkpoint(1))
          .catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(KafkaRecordRejectedError);
        const rejected = failure as KafkaRecordRejectedError;
        expect(rejected.code).toBe("RECORD_REJECTED");
        // A refused batch is split down to the one record the topic refuses.
        expect(rejected.details).toMatchObject({ topic, brokerError: "MESSAGE_TOO_LARGE", records: 1 });
        expect(rejected.details.largestRecordBytes).toBe(5000);
        expect(rejected.message).toContain(`topic '${topic}'`);
        expect(rejected.message).toContain("max.message.bytes");
      } finally {
        await driver.close();
      }
    });
  }

  it("exactly-once: batches over the topic's max.message.bytes are split, records that fit are all written once, in order", async () => {
    const topic = uniqueName("sink-split");
    await createKafkaTopic(kafkaBrokers(), topic, {
      partitions: 2,
      config: { "max.message.bytes": "65536" },
    });
    const driver = await SinkDriver.start(
      new KafkaSink<string>({
        brokers: kafkaBrokers(),
        topic,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: uniqueName("split"),
        key: { serialize: (value) => value.slice(0, 2) },
      }),
    );
    // 2,000 records of 10 KiB, keyed k0..k9; the sink's 256 KiB batches are four times the limit.
    const values = Array.from({ length: 2_000 }, (_, i) => `k${i % 10}:${i}:`.padEnd(10 * 1024, "#"));
    try {
      for (let i = 0; i < values.length; i += 250) await driver.write(values.slice(i, i + 250));
      await driver.checkpoint(1);
      await driver.complete(1);
    } finally {
      await driver.close();
    }
    const records = await readCommittedKafkaRecords(kafkaBrokers(), topic);
    expect(records.map((r) => r.value).sort()).toEqual([...values].sort());
    // Per key (one partition each) in the order written.
    for (let k = 0; k < 10; k++) {
      const ofKey = records.filter((r) => r.key === `k${k}`).map((r) => r.value);
      expect(ofKey).toEqual(values.filter((_, i) => i % 10 === k));
    }
  });

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
