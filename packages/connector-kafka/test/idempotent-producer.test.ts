// The connector's produce path against the real broker, in a transaction and outside one: ordering, deduplication of resent
// batches, failures. Faults are injected between the producer and kafkajs's connection, never in
// the broker.
import { randomUUID } from "node:crypto";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { sharedKafka } from "@onceflow/testkit/vitest";
import { Kafka, logLevel, Partitioners } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KafkaConnection, kafkaErrorType, type OpenTransaction } from "../src/internal/kafkajs/internals.js";
import type { ProduceCluster } from "../src/producer/idempotent-producer.js";
import { decodeProduceResponse } from "../src/protocol/produce-request.js";

const brokers = () => [...sharedKafka().brokers];
const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

let connection: KafkaConnection;
beforeAll(async () => {
  connection = new KafkaConnection(
    new Kafka({ brokers: brokers(), clientId: "producer-test", logLevel: logLevel.NOTHING }),
  );
  await connection.connect();
});
afterAll(async () => {
  await connection?.disconnect();
});

async function begin(
  options: Partial<Parameters<KafkaConnection["beginTransaction"]>[0]> = {},
): Promise<OpenTransaction> {
  return connection.beginTransaction({
    transactionalId: unique("producer-test"),
    transactionTimeout: 60_000,
    partitioner: Partitioners.DefaultPartitioner,
    mapFailure: (error) => error,
    ...options,
  });
}

const commit = (open: OpenTransaction, commit = true) => connection.endTransaction(open, commit);

/** 10,000 keyed records with headers, sent in chunks (`pauseMs` apart); value = sequence number per key. */
async function sendKeyed(
  open: Pick<OpenTransaction, "send">,
  topic: string,
  keys = 50,
  chunks = 20,
  perChunk = 500,
  pauseMs = 0,
) {
  let n = 0;
  for (let c = 0; c < chunks; c++) {
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    const messages = Array.from({ length: perChunk }, () => {
      const i = n++;
      return {
        key: `k${i % keys}`,
        value: `${Math.floor(i / keys)}`.padEnd(40, "."),
        headers: { source: "test", n: Buffer.from(String(i)) },
        ...(i % 7 === 0 ? { timestamp: String(1_700_000_000_000 + i) } : {}),
      };
    });
    await open.send([{ topic, messages }]);
  }
  return n;
}

/** Every third Produce request is written by the broker, but its response is lost. */
function losingEveryThirdResponse() {
  const counter = {
    lost: 0,
    calls: 0,
    wrap: (cluster: ProduceCluster): ProduceCluster => ({
      ...cluster,
      produce: async (nodeId, encode, timeoutMs) => {
        const response = await cluster.produce(nodeId, encode, timeoutMs);
        if (counter.calls++ % 3 === 1) {
          counter.lost++;
          throw Object.assign(new Error("injected: connection lost after the broker wrote"), {
            name: "KafkaJSConnectionError",
            retriable: true,
          });
        }
        return response;
      },
    }),
  };
  return counter;
}

/** Counts the Produce requests of a producer given `wrap` as its `wrapCluster`. */
function countingProduceRequests() {
  const counter = {
    count: 0,
    wrap: (cluster: ProduceCluster): ProduceCluster => ({
      ...cluster,
      produce: (nodeId, encode, timeoutMs) => {
        counter.count++;
        return cluster.produce(nodeId, encode, timeoutMs);
      },
    }),
  };
  return counter;
}

/** Every key's values appear once and in the order sent. */
function expectOncePerKeyInOrder(
  records: Array<{ key: string | null; value: string | null }>,
  keys: number,
  total: number,
) {
  expect(records).toHaveLength(total);
  const next = new Map<string, number>();
  for (const r of records) {
    const expected = next.get(r.key as string) ?? 0;
    expect(Number.parseInt(r.value as string, 10)).toBe(expected);
    next.set(r.key as string, expected + 1);
  }
  expect(next.size).toBe(keys);
}

describe("IdempotentProducer on the real broker", { timeout: 180_000 }, () => {
  it("writes every record once, in order per key, over many small batches and bounded buffers", async () => {
    const topic = unique("producer-order");
    await createKafkaTopic(brokers(), topic, { partitions: 3 });
    const open = await begin({ tuning: { batchBytes: 2_048, maxBufferedBytes: 16 * 1024 } });
    const total = await sendKeyed(open, topic);
    await open.flush();
    await commit(open);
    const records = await readCommittedKafkaRecords(brokers(), topic);
    // Per partition the reader returns offset order; a key lives in one partition.
    expectOncePerKeyInOrder(records, 50, total);
    expect(records.find((r) => r.key === "k3")?.headers).toEqual({ source: "test", n: "3" });
  });

  it("resends a batch whose response was lost with the same sequence: the broker keeps it once", async () => {
    const topic = unique("producer-resend");
    await createKafkaTopic(brokers(), topic, { partitions: 2 });
    const losing = losingEveryThirdResponse();
    const open = await begin({ tuning: { batchBytes: 4_096 }, wrapCluster: losing.wrap });
    const total = await sendKeyed(open, topic, 20, 10, 300);
    await open.flush();
    await commit(open);
    expect(losing.lost).toBeGreaterThan(2);
    expectOncePerKeyInOrder(await readCommittedKafkaRecords(brokers(), topic), 20, total);
  });

  it("splits batches over the topic's max.message.bytes: every record once, in order, same sequences", async () => {
    const topic = unique("producer-split");
    await createKafkaTopic(brokers(), topic, { partitions: 3, config: { "max.message.bytes": "65536" } });
    let refused = 0;
    const counting = (cluster: ProduceCluster): ProduceCluster => ({
      ...cluster,
      // Counts the real broker's MESSAGE_TOO_LARGE answers; changes nothing.
      produce: async (nodeId, encode, timeoutMs) => {
        const response = await cluster.produce(nodeId, encode, timeoutMs);
        refused += decodeProduceResponse(response).filter((r) => r.errorCode === 10).length;
        return response;
      },
    });
    // The default 256 KiB batches hold ~25 records of 10 KiB: four times the topic's limit.
    const open = await begin({ wrapCluster: counting });
    const keys = 30;
    const total = 2_000;
    let n = 0;
    for (let chunk = 0; chunk < 8; chunk++) {
      const messages = Array.from({ length: total / 8 }, () => {
        const i = n++;
        return { key: `k${i % keys}`, value: `${Math.floor(i / keys)}`.padEnd(10 * 1024, "#") };
      });
      await open.send([{ topic, messages }]);
    }
    await open.flush();
    await commit(open);
    const records = await readCommittedKafkaRecords(brokers(), topic);
    expect(records.map((r) => r.value?.length)).toEqual(Array(total).fill(10 * 1024));
    expectOncePerKeyInOrder(
      records.map((r) => ({ key: r.key, value: r.value?.replace(/#+$/, "") ?? null })),
      keys,
      total,
    );
    // Offsets are dense per partition: no batch was appended twice or lost in between.
    for (const partition of [0, 1, 2]) {
      const offsets = records.filter((r) => r.partition === partition).map((r) => Number(r.offset));
      expect(offsets.length).toBeGreaterThan(0);
      for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThan(offsets[i - 1] as number);
    }
    // Batches were refused as too large and split (a refused single record would have failed).
    expect(refused).toBeGreaterThan(0);
  });

  it("lingers (lingerMs): records sent slower than the round trip wait in their batches until flush", async () => {
    const requestsWith = async (lingerMs: number) => {
      const topic = unique("producer-linger");
      await createKafkaTopic(brokers(), topic, { partitions: 3 });
      const requests = countingProduceRequests();
      const open = await begin({ lingerMs, wrapCluster: requests.wrap });
      // 50 ms apart: longer than a produce round trip even to a broker in a container on a busy machine.
      const total = await sendKeyed(open, topic, 30, 20, 15, 50);
      const beforeFlush = requests.count;
      await open.flush();
      await commit(open);
      expectOncePerKeyInOrder(await readCommittedKafkaRecords(brokers(), topic), 30, total);
      return { beforeFlush, all: requests.count };
    };
    // Without lingering, a send that finds its partitions free sends them (20 sends, 50 ms apart).
    const eager = await requestsWith(0);
    expect(eager.beforeFlush).toBeGreaterThanOrEqual(3);
    // Lingering a minute: nothing is sent before the flush, which sends one request (one broker).
    const lingering = await requestsWith(60_000);
    expect(lingering.beforeFlush).toBe(0);
    expect(lingering.all).toBe(1);
  });

  it("sends a lingering batch when its time is up, without a flush", async () => {
    const topic = unique("producer-linger-due");
    await createKafkaTopic(brokers(), topic, { partitions: 1 });
    const requests = countingProduceRequests();
    const open = await begin({ lingerMs: 200, wrapCluster: requests.wrap });
    await open.send([{ topic, messages: [{ value: "a" }, { value: "b" }] }]);
    expect(requests.count).toBe(0);
    await expect.poll(() => requests.count, { timeout: 10_000, interval: 20 }).toBe(1);
    await open.send([{ topic, messages: [{ value: "c" }] }]);
    await open.flush();
    await commit(open);
    expect((await readCommittedKafkaRecords(brokers(), topic)).map((r) => r.value)).toEqual(["a", "b", "c"]);
    expect(requests.count).toBe(2);
  });

  it("a request to a leader takes the other partitions' lingering batches along", async () => {
    const topic = unique("producer-linger-drain");
    await createKafkaTopic(brokers(), topic, { partitions: 3 });
    const open = await begin({ lingerMs: 60_000, tuning: { batchBytes: 4_096 } });
    await open.send([
      {
        topic,
        messages: [
          { value: "one", partition: 1 },
          { value: "two", partition: 2 },
        ],
      },
    ]);
    // Partition 0's batch fills up (4 KiB) and goes out; 1 and 2 are on the same (only) broker.
    const full = Array.from({ length: 60 }, (_, i) => ({ value: `${i}`.padEnd(100, "-"), partition: 0 }));
    await open.send([{ topic, messages: full }]);
    const sentBeforeFlush = async () =>
      (await readCommittedKafkaRecords(brokers(), topic, { isolation: "read_uncommitted" }))
        .filter((r) => r.partition !== 0)
        .map((r) => r.value)
        .sort();
    await expect.poll(sentBeforeFlush, { timeout: 10_000, interval: 100 }).toEqual(["one", "two"]);
    await open.flush();
    await commit(open);
    expect(await readCommittedKafkaRecords(brokers(), topic)).toHaveLength(62);
  });

  it("a lingering batch that cannot join the transaction fails the producer: flush throws, nothing escapes", async () => {
    const topic = unique("producer-linger-fail");
    await createKafkaTopic(brokers(), topic, { partitions: 2 });
    const refused = Object.assign(new Error("injected: Failed to find group coordinator"), {
      name: "KafkaJSGroupCoordinatorNotFound",
      retriable: false,
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const open = await begin({
        lingerMs: 50,
        wrapCluster: (cluster) => ({ ...cluster, addPartitions: () => Promise.reject(refused) }),
      });
      await open.send([{ topic, messages: [{ value: "a" }, { value: "b" }] }]);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await expect(open.send([{ topic, messages: [{ value: "c" }] }])).rejects.toBe(refused);
      await expect(open.flush()).rejects.toBe(refused);
      await open.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("fails on a non-retriable broker error: flush and later sends throw it, and the abort leaves nothing", async () => {
    const topic = unique("producer-reject");
    await createKafkaTopic(brokers(), topic, { partitions: 1, config: { "max.message.bytes": "2000" } });
    const open = await begin();
    await open.send([{ topic, messages: [{ value: "small" }, { value: "x".repeat(5_000) }] }]);
    const failure = await open.flush().catch((error: unknown) => error);
    expect(kafkaErrorType(failure)).toBe("MESSAGE_TOO_LARGE");
    await expect(open.send([{ topic, messages: [{ value: "more" }] }])).rejects.toBe(failure);
    await open.close();
    await commit(open, false);
    expect(await readCommittedKafkaRecords(brokers(), topic)).toEqual([]);
    // The refused batch was split: "small" went alone (and was aborted), the large record never got in.
    const written = await readCommittedKafkaRecords(brokers(), topic, { isolation: "read_uncommitted" });
    expect(written.map((r) => r.value)).toEqual(["small"]);
  });

  it("outside transactions (at-least-once, none): visible once acknowledged, resent batches kept once, too-large batches split", async () => {
    const topic = unique("producer-idempotent");
    await createKafkaTopic(brokers(), topic, { partitions: 2, config: { "max.message.bytes": "4096" } });
    const losing = losingEveryThirdResponse();
    const producer = await connection.startIdempotentProducer({
      partitioner: Partitioners.DefaultPartitioner,
      mapFailure: (error) => error,
      // Batches four times the topic's limit: each is split before it is written.
      tuning: { batchBytes: 16_384 },
      wrapCluster: losing.wrap,
    });
    expect(BigInt(producer.producerId)).toBeGreaterThanOrEqual(0n);
    const total = await sendKeyed(producer, topic, 20, 10, 300);
    await producer.flush();
    await producer.close();
    expect(losing.lost).toBeGreaterThan(2);
    // No transaction to commit: a read_committed reader sees every record once it is acknowledged
    // (transactional batches outside a transaction would have been refused).
    expectOncePerKeyInOrder(await readCommittedKafkaRecords(brokers(), topic), 20, total);
  });

  it("maxInFlightRequestsPerBroker bounds the Produce requests in flight to a broker; maxRequestBytes the batches per request", async () => {
    const inFlightAtMost = async (maxInFlightRequestsPerBroker: number) => {
      const topic = unique("producer-in-flight");
      await createKafkaTopic(brokers(), topic, { partitions: 8 });
      let inFlight = 0;
      let most = 0;
      let requests = 0;
      const producer = await connection.startIdempotentProducer({
        partitioner: Partitioners.DefaultPartitioner,
        mapFailure: (error) => error,
        // Nothing leaves before the flush, which then seals a batch per partition at once.
        lingerMs: 60_000,
        settings: {
          batchBytes: 4_096,
          // A 3 kB batch per partition, one per request: eight requests.
          maxRequestBytes: 4_096,
          maxInFlightRequestsPerBroker,
          retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1_000, multiplier: 2 },
        },
        wrapCluster: (cluster) => ({
          ...cluster,
          produce: async (nodeId, encode, timeoutMs) => {
            requests++;
            most = Math.max(most, ++inFlight);
            try {
              return await cluster.produce(nodeId, encode, timeoutMs);
            } finally {
              inFlight--;
            }
          },
        }),
      });
      await producer.send([
        {
          topic,
          messages: Array.from({ length: 8 }, (_, partition) => ({
            value: `p${partition}`.padEnd(3_000, "."),
            partition,
          })),
        },
      ]);
      await producer.flush();
      await producer.close();
      expect(await readCommittedKafkaRecords(brokers(), topic)).toHaveLength(8);
      return { most, requests };
    };
    expect(await inFlightAtMost(1)).toEqual({ most: 1, requests: 8 });
    expect(await inFlightAtMost(3)).toEqual({ most: 3, requests: 8 });
  });

  it("a fenced producer's writes are refused with a typed error", async () => {
    const topic = unique("producer-fenced");
    await createKafkaTopic(brokers(), topic, { partitions: 1 });
    const transactionalId = unique("producer-fenced");
    const open = await begin({ transactionalId });
    await open.send([{ topic, messages: [{ value: "before" }] }]);
    await open.flush();
    await connection.fence(transactionalId, 60_000);
    await open.send([{ topic, messages: [{ value: "after" }] }]);
    const failure = await open.flush().catch((error: unknown) => error);
    expect(["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"]).toContain(kafkaErrorType(failure));
    await open.close();
    expect(await readCommittedKafkaRecords(brokers(), topic)).toEqual([]);
  });
});
