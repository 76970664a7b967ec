import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sharedKafka } from "../../vitest/shared-services.js";
import { produceTransactions, readValues } from "./fixtures/transactions.js";
import { startKafka } from "./start-kafka.js";

describe("the run's shared Kafka broker", () => {
  it("serves transactions: read_committed sees committed records only, never an aborted one", async () => {
    const kafka = sharedKafka();
    const topic = `testkit-tx-${randomUUID()}`;
    await kafka.createTopic(topic, { partitions: 1 });
    await produceTransactions(kafka.brokers, topic, [
      { values: ["c1", "c2"], outcome: "commit" },
      { values: ["a1"], outcome: "abort" },
      { values: ["c3"], outcome: "commit" },
    ]);
    // c3 lies after the aborted record: once it arrived, a1 was passed over, not just not yet read.
    const committed = await readValues(kafka.brokers, topic, { readUncommitted: false, expected: 3 });
    expect(committed).toEqual(["c1", "c2", "c3"]);
    // The aborted record is on the log: a read_uncommitted consumer does see it.
    const everything = await readValues(kafka.brokers, topic, { readUncommitted: true, expected: 4 });
    expect(everything).toEqual(["c1", "c2", "a1", "c3"]);
  });

  it("createTopic makes the partitions asked for, and refuses a name that exists", async () => {
    const kafka = sharedKafka();
    const topic = `testkit-topic-${randomUUID()}`;
    await kafka.createTopic(topic, { partitions: 3, config: { "retention.ms": "600000" } });
    await expect(kafka.createTopic(topic, { partitions: 3 })).rejects.toThrow(/already exists/);
  });

  it("named by ONCEFLOW_KAFKA_BROKERS, it is used as is, and fault injection is refused clearly", async () => {
    const shared = sharedKafka();
    const lines: string[] = [];
    const kafka = await startKafka({
      env: { ONCEFLOW_KAFKA_BROKERS: shared.brokers.join(",") },
      writer: (line) => lines.push(line),
    });
    expect(kafka.provider).toBe("environment");
    expect(kafka.brokers).toEqual(shared.brokers);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("via environment");
    await expect(kafka.kill()).rejects.toThrow(/fault injection needs a provider the testkit controls/);
    await expect(kafka.start()).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });
    await kafka.stop(); // forgets it; the shared broker keeps serving
    await kafka.createTopic(`testkit-after-stop-${randomUUID()}`, { partitions: 1 });
  });
});
