import { randomUUID } from "node:crypto";
import { createMemoryLogger, createMemoryMetrics, type SourceReaderContext } from "@onceflow/core";
import { type CommittedKafkaRecord, createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { sharedKafka } from "@onceflow/testkit/vitest";
import { type Admin, Kafka, logLevel } from "kafkajs";

/**
 * The shared broker of this test run, from the testkit's global setup (which honours
 * ONCEFLOW_KAFKA_BROKERS, or starts a broker). A missing broker fails the run loudly; it never skips.
 */
export function kafkaBrokers(): string[] {
  return [...sharedKafka().brokers];
}

export function kafkaClient(brokers: string[] = kafkaBrokers()): Kafka {
  return new Kafka({ brokers, clientId: "onceflow-test", logLevel: logLevel.NOTHING });
}

/** A topic name unique to this run, since the broker is shared. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export async function withAdmin<T>(fn: (admin: Admin) => Promise<T>, brokers?: string[]): Promise<T> {
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopic(name: string, partitions = 1, brokers?: string[]): Promise<string> {
  await createKafkaTopic(brokers ?? kafkaBrokers(), name, { partitions });
  return name;
}

/** Writes `values` as plain (non-transactional) records; `partition` chooses one partition. */
export async function produce(
  topic: string,
  messages: Array<{
    key?: string | Buffer | null;
    value: string | Buffer | null;
    partition?: number;
    timestamp?: number;
    headers?: Record<string, string>;
  }>,
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

/**
 * Every record of `topic` as a Java consumer with isolation.level=read_committed sees it (the
 * testkit's reader: kafkajs' own consumer lets aborted records through when transactions of several
 * producers interleave). With `expected`, reads again until that many arrived or `timeoutMs` passed,
 * then once more a second later, so that duplicates arriving late are seen too.
 */
export async function readAll(
  topic: string,
  options: { expected?: number; timeoutMs?: number; readUncommitted?: boolean; brokers?: string[] } = {},
): Promise<CommittedKafkaRecord[]> {
  const brokers = options.brokers ?? kafkaBrokers();
  const read = () =>
    readCommittedKafkaRecords(brokers, topic, {
      isolation: options.readUncommitted ? "read_uncommitted" : "read_committed",
    });
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let records = await read();
  if (options.expected === undefined) return records;
  while (records.length < options.expected && Date.now() < deadline) {
    await sleep(200);
    records = await read();
  }
  await sleep(1000);
  return read();
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
      isRestored: false,
      checkpointingInterval: undefined,
      logger,
      metrics,
      ...overrides,
    } satisfies SourceReaderContext,
    metrics,
    logger,
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Writes `value` in a transaction on `transactionalId` as a plain kafkajs producer would, and
 * commits it or leaves it open (what a crashed or frozen writer leaves behind).
 */
export async function writeInTransaction(
  transactionalId: string,
  topic: string,
  value: string,
  end: "commit" | "leave-open",
  transactionTimeout = 60_000,
): Promise<void> {
  const producer = kafkaClient().producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout,
  });
  await producer.connect();
  const transaction = await producer.transaction();
  await transaction.send({ topic, messages: [{ value }] });
  if (end === "commit") await transaction.commit();
  await producer.disconnect();
}
