import { randomUUID } from "node:crypto";
import { createMemoryLogger, createMemoryMetrics, type SourceReaderContext } from "@onceflow/core";
import { type Admin, Kafka, logLevel } from "kafkajs";

/**
 * The broker address for these tests. One place, so that it can switch to the testkit's `inject`.
 * A missing broker fails the run loudly; it never skips.
 */
export function kafkaBrokers(): string[] {
  const value = process.env.ONCEFLOW_KAFKA_BROKERS;
  if (value === undefined || value.trim() === "") {
    throw new Error(
      "ONCEFLOW_KAFKA_BROKERS is not set: these tests need a real Kafka broker (for example ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092)",
    );
  }
  return value.split(",").map((b) => b.trim());
}

export function kafkaClient(brokers: string[] = kafkaBrokers()): Kafka {
  return new Kafka({ brokers, clientId: "onceflow-test", logLevel: logLevel.NOTHING });
}

/** A topic name unique to this run, since the broker is shared. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export async function withAdmin<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafkaClient().admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopic(name: string, partitions = 1): Promise<string> {
  await withAdmin(async (admin) => {
    await admin.createTopics({ topics: [{ topic: name, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: false });
    // Wait until every partition has a leader (metadata can lag the creation for a moment).
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        const { topics } = await admin.fetchTopicMetadata({ topics: [name] });
        const ready = topics[0]?.partitions.filter((p) => p.leader >= 0).length ?? 0;
        if (ready === partitions) return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
      }
      if (Date.now() > deadline) throw new Error(`topic ${name} has no leaders after 15 s`);
      await sleep(100);
    }
  });
  return name;
}

/** Writes `values` as plain (non-transactional) records; `partition` chooses one partition. */
export async function produce(
  topic: string,
  messages: Array<{ key?: string | Buffer | null; value: string | Buffer | null; partition?: number; timestamp?: number; headers?: Record<string, string> }>,
): Promise<void> {
  const producer = kafkaClient().producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: messages.map((m) => ({
        key: m.key ?? null,
        value: m.value,
        ...(m.partition === undefined ? {} : { partition: m.partition }),
        ...(m.timestamp === undefined ? {} : { timestamp: String(m.timestamp) }),
        ...(m.headers === undefined ? {} : { headers: m.headers }),
      })),
    });
  } finally {
    await producer.disconnect();
  }
}

/** Every committed record of `topic` (read_committed), read until `expected` records arrived or `timeoutMs` passed. */
export async function readAll(
  topic: string,
  options: { expected?: number; timeoutMs?: number; readUncommitted?: boolean } = {},
): Promise<Array<{ partition: number; offset: string; key: string | null; value: string | null; headers: Record<string, string> }>> {
  const kafka = kafkaClient();
  const consumer = kafka.consumer({ groupId: uniqueName("reader"), readUncommitted: options.readUncommitted ?? false });
  const records: Array<{ partition: number; offset: string; key: string | null; value: string | null; headers: Record<string, string> }> = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
      records.push({
        partition,
        offset: message.offset,
        key: message.key?.toString() ?? null,
        value: message.value?.toString() ?? null,
        headers,
      });
      if (options.expected !== undefined && records.length >= options.expected) resolveDone();
    },
  });
  const timeout = new Promise<void>((resolve) => setTimeout(resolve, options.timeoutMs ?? 10_000));
  await Promise.race([done, timeout]);
  // Give extra (unexpected) records a moment to show up, so duplicates are seen.
  if (options.expected !== undefined) await new Promise((r) => setTimeout(r, 1000));
  await consumer.disconnect();
  return records;
}

export function readerContext(overrides: Partial<SourceReaderContext> = {}) {
  const metrics = createMemoryMetrics();
  const logger = createMemoryLogger();
  return {
    context: {
      jobId: "test",
      operatorUid: "kafka-in",
      subtaskIndex: 0,
      parallelism: 1,
      logger,
      metrics,
      ...overrides,
    } satisfies SourceReaderContext,
    metrics,
    logger,
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
