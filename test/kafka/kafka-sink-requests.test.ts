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

describe("KafkaSink requests", { timeout: 120_000 }, () => {
  it("sends no Metadata request per Produce: metadata is cached between transactions", async () => {
    const topic = await createTopic(uniqueName("sink-requests"), 2);
    const { kafka, requests } = countingClient();
    const driver = await SinkDriver.start(
      new KafkaSink<string>({
        kafka,
        topic,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: uniqueName("requests"),
      }),
    );
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
});
