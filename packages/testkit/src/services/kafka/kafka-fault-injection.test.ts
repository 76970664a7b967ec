import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { isProcessAlive } from "../../runtime/processes.js";
import { usePrivateKafka } from "../../vitest/shared-services.js";
import { produceTransactions, readValues } from "./fixtures/transactions.js";

describe("a private broker for fault injection", () => {
  const kafka = usePrivateKafka();

  it("killed with SIGKILL and started again, it serves its committed data on the same address", async () => {
    const broker = kafka();
    expect(broker.provider).not.toBe("environment");
    const brokersBefore = [...broker.brokers];
    const topic = `testkit-crash-${randomUUID()}`;
    await broker.createTopic(topic, { partitions: 1 });
    await produceTransactions(broker.brokers, topic, [
      { values: ["before-1", "before-2"], outcome: "commit" },
      { values: ["lost"], outcome: "abort" },
    ]);

    const pidBefore = broker.pid;
    await broker.kill();
    if (pidBefore !== undefined) expect(isProcessAlive(pidBefore)).toBe(false);
    await broker.start();
    expect(broker.brokers).toEqual(brokersBefore);
    if (pidBefore !== undefined) expect(broker.pid).not.toBe(pidBefore);

    await produceTransactions(broker.brokers, topic, [{ values: ["after-1"], outcome: "commit" }]);
    const values = await readValues(broker.brokers, topic, { readUncommitted: false, expected: 3 });
    expect(values).toEqual(["before-1", "before-2", "after-1"]);
  });

  it("stop() leaves no broker process behind and deletes its folder", async () => {
    const broker = kafka();
    const { pid, workDir } = broker;
    if (broker.provider === "local") {
      expect(pid).toBeTypeOf("number");
      expect(isProcessAlive(pid!)).toBe(true);
      expect(existsSync(workDir!)).toBe(true);
    }
    await broker.stop();
    if (broker.provider === "local") {
      expect(isProcessAlive(pid!)).toBe(false);
      expect(existsSync(workDir!)).toBe(false);
    }
    await expect(broker.start()).rejects.toThrow(/stopped/);
  });
});
