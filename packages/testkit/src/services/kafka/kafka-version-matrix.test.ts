import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sharedKafka, usePrivateKafka } from "../../vitest/shared-services.js";
import { produceTransactions, readValues } from "./fixtures/transactions.js";
import { KAFKA_VERSIONS, kafkaMajor, resolveKafkaVersion } from "./kafka-versions.js";

// The connector runs on Kafka 3.9 and 4.x. The shared broker is one of them (ONCEFLOW_KAFKA_VERSION
// chooses); this file starts the other next to it, so every run covers both lines.
const sharedVersion = resolveKafkaVersion();
const otherVersion = kafkaMajor(sharedVersion) >= 4 ? KAFKA_VERSIONS.default : KAFKA_VERSIONS.latest4;

describe(`a second broker of another version (${otherVersion})`, () => {
  const other = usePrivateKafka({ version: otherVersion });

  it("runs the version asked for, next to the shared one", () => {
    expect(other().version).toBe(otherVersion);
    expect(kafkaMajor(other().version)).not.toBe(kafkaMajor(sharedVersion));
    expect(other().brokers).not.toEqual(sharedKafka().brokers);
  });

  it("serves transactions to kafkajs: committed visible, aborted not", async () => {
    const broker = other();
    const topic = `testkit-version-${randomUUID()}`;
    await broker.createTopic(topic, { partitions: 2 });
    await produceTransactions(broker.brokers, topic, [
      { values: ["c1"], outcome: "commit" },
      { values: ["a1"], outcome: "abort" },
      { values: ["c2"], outcome: "commit" },
    ]);
    const values = await readValues(broker.brokers, topic, { readUncommitted: false, expected: 2 });
    expect(values.sort()).toEqual(["c1", "c2"]);
  });
});
