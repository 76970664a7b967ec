import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { findFreePort } from "../../runtime/free-port.js";
import { isProcessAlive } from "../../runtime/processes.js";
import { usePrivateKafka } from "../../vitest/shared-services.js";
import { produceTransactions, readValues } from "./fixtures/transactions.js";

// The first ports handed out include one this file holds open, as if another process took it between
// "found free" and "bound": the broker's first start must cope by taking other ports.
const held = vi.hoisted(() => ({ port: 0, handedOut: false }));
vi.mock("../../runtime/free-port.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../runtime/free-port.js")>();
  return {
    ...original,
    findFreePorts: async (count: number, host?: string) => {
      const ports = await original.findFreePorts(count, host);
      if (held.handedOut || held.port === 0) return ports;
      held.handedOut = true;
      return [held.port, ...ports.filter((port) => port !== held.port).slice(1)];
    },
  };
});

let blocker: Server;
beforeAll(async () => {
  held.port = await findFreePort();
  blocker = createServer((socket) => socket.destroy()); // holds the port, serves nobody
  await new Promise<void>((resolve) => blocker.listen(held.port, "127.0.0.1", resolve));
});
afterAll(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

// A broker restart is a JVM start: over a minute on a loaded 2-core machine.
describe("a private broker for fault injection", { timeout: 240_000 }, () => {
  const kafka = usePrivateKafka();

  it("started on other ports when the first one it found was taken before it could bind", () => {
    if (kafka().provider !== "local") return;
    expect(held.handedOut).toBe(true);
    expect(kafka().brokers).not.toContain(`127.0.0.1:${held.port}`);
  });

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
