import { KafkaSink } from "@onceflow/connector-kafka";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { createTopic, kafkaBrokers, readAll, uniqueName } from "./helpers/kafka.js";

/** A kafkajs client that counts the requests it sends, by API name (from its debug log). */
function countingClient(): { kafka: Kafka; requests: Map<string, number> } {
  const requests = new Map<string, number>();
  const kafka = new Kafka({
    brokers: kafkaBrokers(),
    clientId: "request-count",
    logLevel: logLevel.DEBUG,
    logCreator:
      () =>
      ({ log }) => {
        // kafkajs logs every request as "Request <ApiName>(key: …, version: …)".
        const api = /^Request (\w+)\(/.exec(log.message)?.[1];
        if (api !== undefined) requests.set(api, (requests.get(api) ?? 0) + 1);
      },
  });
  return { kafka, requests };
}

/** An exactly-once sink writing `topic` through `kafka`, with a prefix of its own. */
function exactlyOnceSinkOn(
  kafka: Kafka,
  topic: string,
  options: { lingerMs?: number } = {},
): KafkaSink<string> {
  return new KafkaSink<string>({
    kafka,
    topic,
    deliveryGuarantee: "exactly-once",
    transactionalIdPrefix: uniqueName("requests"),
    ...options,
  });
}

describe("KafkaSink requests", { timeout: 120_000 }, () => {
  it("sends no Metadata request per Produce: metadata is cached between transactions", async () => {
    const topic = await createTopic(uniqueName("sink-requests"), 2);
    const { kafka, requests } = countingClient();
    const driver = await SinkDriver.start(exactlyOnceSinkOn(kafka, topic));
    const checkpoints = 12;
    try {
      for (let checkpoint = 1; checkpoint <= checkpoints; checkpoint++) {
        await driver.write(Array.from({ length: 50 }, (_, i) => `c${checkpoint}-${i}`));
        await driver.checkpoint(checkpoint);
        await driver.complete(checkpoint);
      }
    } finally {
      await driver.close();
    }
    expect((await readAll(topic, { expected: checkpoints * 50 })).length).toBe(checkpoints * 50);
    const produces = requests.get("Produce") ?? 0;
    expect(produces).toBeGreaterThanOrEqual(checkpoints);
    // One for the connection and one when the topic becomes a target; kafkajs's default
    // (always stale) sent one before every Produce.
    expect(requests.get("Metadata") ?? 0).toBeLessThan(checkpoints / 2);
  });

  it("lingers under exactly-once by default: small writes between checkpoints go out at the pre-commit", async () => {
    const producesWith = async (lingerMs: number | undefined) => {
      const topic = await createTopic(uniqueName("sink-linger"), 2);
      const { kafka, requests } = countingClient();
      const driver = await SinkDriver.start(
        exactlyOnceSinkOn(kafka, topic, lingerMs === undefined ? {} : { lingerMs }),
      );
      const started = Date.now();
      let writingMs = 0;
      try {
        // Ten small writes 20 ms apart (slower than a local round trip), then the checkpoint.
        for (let write = 0; write < 10; write++) {
          await driver.write([`w${write}-a`, `w${write}-b`]);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        writingMs = Date.now() - started;
        await driver.checkpoint(1);
        await driver.complete(1);
      } finally {
        await driver.close();
      }
      expect((await readAll(topic, { expected: 20 })).length).toBe(20);
      return { produces: requests.get("Produce") ?? 0, writingMs };
    };
    // The default (100 ms): one request per 100 ms of writing at most, then the pre-commit's.
    const lingering = await producesWith(undefined);
    expect(lingering.produces).toBeLessThanOrEqual(Math.ceil(lingering.writingMs / 100) + 1);
    // Without lingering, a write that finds its partitions free sends them.
    expect((await producesWith(0)).produces).toBeGreaterThanOrEqual(5);
    expect(
      () =>
        new KafkaSink({
          brokers: kafkaBrokers(),
          topic: "any",
          deliveryGuarantee: "exactly-once",
          transactionalIdPrefix: "any",
          lingerMs: -1,
        }),
    ).toThrow(/lingerMs.*must be an integer number of milliseconds ≥ 0, got -1/);
  });
});
