import { readFile } from "node:fs/promises";
import {
  KafkaDeliveryTimeoutError,
  KafkaRecordRejectedError,
  KafkaSink,
  type KafkaSinkOptions,
} from "@onceflow/connector-kafka";
import { ConfigurationError } from "@onceflow/core";
import { createKafkaTopic } from "@onceflow/testkit";
import { usePrivateKafka } from "@onceflow/testkit/vitest";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { createTopic, kafkaBrokers, readAll, uniqueName } from "./helpers/kafka.js";

/** A kafkajs client that keeps the size of every Produce request it sends (from its debug log). */
function measuringClient(brokers: string[] = kafkaBrokers()): { kafka: Kafka; produceSizes: number[] } {
  const produceSizes: number[] = [];
  const kafka = new Kafka({
    brokers,
    clientId: "produce-sizes",
    logLevel: logLevel.DEBUG,
    logCreator:
      () =>
      ({ log }) => {
        if (/^Request Produce\(/.test(log.message))
          produceSizes.push(Number((log as { size?: unknown }).size));
      },
  });
  return { kafka, produceSizes };
}

function sinkOn(topic: string, options: Partial<KafkaSinkOptions<string>> = {}): KafkaSink<string> {
  return new KafkaSink<string>({
    ...(options.kafka === undefined ? { brokers: kafkaBrokers() } : {}),
    topic,
    deliveryGuarantee: "at-least-once",
    ...options,
  });
}

/** The error a write or a checkpoint of `driver` fails with (a send failure shows at the latest there). */
async function failureOf(
  driver: SinkDriver<string>,
  values: string[],
  checkpointId: number,
): Promise<unknown> {
  try {
    await driver.write(values);
    await driver.checkpoint(checkpointId);
  } catch (error) {
    return error;
  }
  throw new Error("expected the write or its checkpoint to fail");
}

describe("KafkaSink producer settings", { timeout: 120_000 }, () => {
  it("refuses settings out of range at construction, naming the setting and what to change", () => {
    const refused: Array<[Partial<KafkaSinkOptions<string>>, string, RegExp]> = [
      [{ maxInFlightRequestsPerConnection: 6 }, "maxInFlightRequestsPerConnection", /at most 5/],
      [{ maxInFlightRequestsPerConnection: 0 }, "maxInFlightRequestsPerConnection", /integer ≥ 1/],
      [{ batchSize: 2_000_000 }, "batchSize", /raise maxRequestSize/],
      [{ maxRequestSize: -1 }, "maxRequestSize", /integer ≥ 1/],
      [{ requestTimeoutMs: 1.5 }, "requestTimeoutMs", /integer/],
      [
        { deliveryTimeoutMs: 10_000, requestTimeoutMs: 30_000 },
        "deliveryTimeoutMs",
        /lingerMs \+ requestTimeoutMs/,
      ],
      [{ retries: -1 }, "retries", /integer ≥ 0/],
      [{ retryBackoffMs: -5 }, "retryBackoffMs", /integer ≥ 0/],
      [{ acks: 1 as unknown as "all" }, "acks", /idempotent/],
    ];
    for (const [options, setting, says] of refused) {
      let thrown: unknown;
      try {
        sinkOn("t", options);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, setting).toBeInstanceOf(ConfigurationError);
      expect((thrown as ConfigurationError).setting).toBe(setting);
      expect((thrown as Error).message).toMatch(says);
    }
    expect(() => sinkOn("t", { acks: "all", maxInFlightRequestsPerConnection: 1, retries: 0 })).not.toThrow();
  });

  it("maxRequestSize: a record over it is refused before it is sent, with RECORD_REJECTED naming the setting", async () => {
    // The topic would take it (max.message.bytes 1 MB): only the sink's limit refuses it.
    const topic = await createTopic(uniqueName("sink-max-request"), 1);
    const driver = await SinkDriver.start(sinkOn(topic, { maxRequestSize: 10_000, batchSize: 4_096 }));
    let rejected: unknown;
    try {
      await driver.write(["small"]);
      await driver.checkpoint(1);
      rejected = await failureOf(driver, ["x".repeat(20_000)], 2);
    } finally {
      await driver.close();
    }
    expect(rejected).toBeInstanceOf(KafkaRecordRejectedError);
    const error = rejected as KafkaRecordRejectedError;
    expect(error.code).toBe("RECORD_REJECTED");
    expect(error.details).toMatchObject({ topic, brokerError: "RECORD_TOO_LARGE", records: 1 });
    expect(error.details.largestRecordBytes).toBeGreaterThan(20_000);
    expect(error.message).toContain("maxRequestSize (10000)");
    expect((await readAll(topic, { expected: 1 })).map((r) => r.value)).toEqual(["small"]);
  });

  it("maxRequestSize raised: a record larger than the default 1 MiB is written to a topic that takes it", async () => {
    const topic = uniqueName("sink-large-record");
    await createKafkaTopic(kafkaBrokers(), topic, {
      partitions: 1,
      config: { "max.message.bytes": "3000000" },
    });
    const large = "y".repeat(1_500_000);
    const refusedByDefault = await SinkDriver.start(sinkOn(topic));
    const error = await failureOf(refusedByDefault, [large], 1).finally(() => refusedByDefault.close());
    expect((error as KafkaRecordRejectedError).details.brokerError).toBe("RECORD_TOO_LARGE");
    const driver = await SinkDriver.start(sinkOn(topic, { maxRequestSize: 2_000_000 }));
    try {
      await driver.write([large]);
      await driver.checkpoint(1);
    } finally {
      await driver.close();
    }
    expect((await readAll(topic, { expected: 1 })).map((r) => r.value?.length)).toEqual([1_500_000]);
  });

  it("batchSize: batches, and so Produce requests, are sealed at it", async () => {
    const requestSizes = async (batchSize: number | undefined) => {
      const topic = await createTopic(uniqueName("sink-batch-size"), 1);
      const { kafka, produceSizes } = measuringClient();
      const driver = await SinkDriver.start(
        sinkOn(topic, { kafka, lingerMs: 0, ...(batchSize === undefined ? {} : { batchSize }) }),
      );
      try {
        // 200 records of 1 kB in one write: a single partition's batches, sent one request at a time.
        await driver.write(Array.from({ length: 200 }, (_, i) => `${i}`.padEnd(1_000, "-")));
        await driver.checkpoint(1);
      } finally {
        await driver.close();
      }
      expect(await readAll(topic, { expected: 200 })).toHaveLength(200);
      return produceSizes;
    };
    const small = await requestSizes(4_096);
    const large = await requestSizes(65_536);
    // A request holds one batch of the one partition plus about 150 bytes of request framing.
    expect(Math.max(...small)).toBeLessThanOrEqual(4_096 + 200);
    expect(small.length).toBeGreaterThanOrEqual(200_000 / 4_096);
    expect(Math.max(...large)).toBeGreaterThan(4_096 + 200);
    expect(Math.max(...large)).toBeLessThanOrEqual(65_536 + 200);
    expect(large.length).toBeLessThan(small.length);
  });
});

/** Waits until the process is stopped (state `T` in /proc): a signal reaches a JVM's threads with a delay. */
async function stopped(pid: number): Promise<void> {
  for (let round = 0; round < 100; round++) {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("T")) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`process ${pid} did not stop`);
}

describe("KafkaSink producer timeouts against a broker that stops answering", { timeout: 180_000 }, () => {
  // This test freezes its broker: a private one, never the shared one.
  const kafka = usePrivateKafka();

  it("requestTimeoutMs ends each unanswered Produce, and deliveryTimeoutMs bounds the send with a typed error", async () => {
    const service = kafka();
    const brokers = [...service.brokers];
    const topic = uniqueName("sink-delivery-timeout");
    await createKafkaTopic(brokers, topic, { partitions: 1 });
    const pid = service.pid;
    if (pid === undefined) throw new Error("the private broker has no process to freeze");
    const driver = await SinkDriver.start(
      new KafkaSink<string>({
        brokers,
        topic,
        deliveryGuarantee: "at-least-once",
        lingerMs: 0,
        requestTimeoutMs: 1_000,
        deliveryTimeoutMs: 4_000,
      }),
    );
    let failure: unknown;
    try {
      await driver.write(["before"]);
      await driver.checkpoint(1);
      // Frozen, not gone: connections stay open and nothing answers (a hung broker, a partition).
      process.kill(pid, "SIGSTOP");
      // Resumed after a minute whatever happens: a send that never fails then succeeds, and fails the test.
      const resume = setTimeout(() => process.kill(pid, "SIGCONT"), 60_000);
      await stopped(pid);
      try {
        failure = await failureOf(driver, ["during-1", "during-2"], 2);
      } finally {
        clearTimeout(resume);
        process.kill(pid, "SIGCONT");
      }
    } finally {
      await driver.close();
    }
    expect(failure).toBeInstanceOf(KafkaDeliveryTimeoutError);
    const error = failure as KafkaDeliveryTimeoutError;
    expect(error.code).toBe("SERVICE_UNAVAILABLE");
    expect(error.details).toMatchObject({ topic, partition: 0, records: 2, deliveryTimeoutMs: 4_000 });
    expect(error.message).toContain("deliveryTimeoutMs (4000 ms");
    // Each request ended at requestTimeoutMs (1 s), not at kafkajs's own 30 s.
    expect(String((error.cause as Error)?.message)).toContain("requestTimeoutMs");
  });

  it("retries, or the kafkajs client's retry.retries, ends the resends before deliveryTimeoutMs would", async () => {
    const service = kafka();
    const brokers = [...service.brokers];
    const topic = uniqueName("sink-retries");
    await createKafkaTopic(brokers, topic, { partitions: 1 });
    const pid = service.pid;
    if (pid === undefined) throw new Error("the private broker has no process to freeze");
    // kafkajs's own requests (metadata) give up after a second too, so resends are not held up.
    const client = (retry?: { retries: number }) =>
      new Kafka({ brokers, requestTimeout: 1_000, logLevel: logLevel.NOTHING, ...(retry ? { retry } : {}) });
    const common = {
      topic,
      deliveryGuarantee: "at-least-once",
      lingerMs: 0,
      requestTimeoutMs: 1_000,
      deliveryTimeoutMs: 30_000,
    } as const;
    const drivers = [
      await SinkDriver.start(new KafkaSink<string>({ ...common, kafka: client(), retries: 1 })),
      await SinkDriver.start(new KafkaSink<string>({ ...common, kafka: client({ retries: 1 }) })),
    ];
    let failures: unknown[] = [];
    try {
      for (const driver of drivers) {
        await driver.write(["before"]);
        await driver.checkpoint(1);
      }
      process.kill(pid, "SIGSTOP");
      const resume = setTimeout(() => process.kill(pid, "SIGCONT"), 100_000);
      await stopped(pid);
      try {
        failures = await Promise.all(drivers.map((driver) => failureOf(driver, ["during"], 2)));
      } finally {
        clearTimeout(resume);
        process.kill(pid, "SIGCONT");
      }
    } finally {
      for (const driver of drivers) await driver.close();
    }
    // Unbounded resends would have ended only at the delivery timeout (30 s), with its error.
    for (const failure of failures) {
      expect(failure).toBeInstanceOf(Error);
      expect(failure).not.toBeInstanceOf(KafkaDeliveryTimeoutError);
      expect((failure as Error).message).not.toContain("expected the write");
    }
  });
});
