import { randomUUID } from "node:crypto";
import { createMemoryLogger, createMemoryMetrics, type SourceReaderContext } from "@onceflow/core";
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
  await withAdmin(async (admin) => {
    await admin.createTopics({
      topics: [{ topic: name, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: false,
    });
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
  }, brokers);
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

type OutputRecord = {
  partition: number;
  offset: string;
  key: string | null;
  value: string | null;
  headers: Record<string, string>;
};

interface RawBatchRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | Buffer[]>;
  isControlRecord: boolean;
  batchContext: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

/**
 * Every committed record of `topic`, read like the Java consumer with isolation.level=read_committed,
 * until `expected` records arrived (then a second more, to see duplicates) or `timeoutMs` passed.
 *
 * This is the tests' oracle, so it does not use kafkajs' consumer: kafkajs lets aborted records
 * through when transactions of several producers interleave (it expects the broker's list of aborted
 * transactions sorted, which it is not). Here the Java client's rule is applied per record batch.
 */
export async function readAll(
  topic: string,
  options: { expected?: number; timeoutMs?: number; readUncommitted?: boolean; brokers?: string[] } = {},
): Promise<OutputRecord[]> {
  const kafka = kafkaClient(options.brokers);
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === "private:Kafka:createCluster",
  );
  const createCluster = (kafka as unknown as Record<symbol, (o: object) => TestCluster>)[
    symbol as symbol
  ] as (o: object) => TestCluster;
  const cluster = createCluster({});
  await cluster.connect();
  const records: OutputRecord[] = [];
  try {
    await cluster.addTargetTopic(topic);
    const partitions = cluster.findTopicPartitionMetadata(topic).map((p) => p.partitionId);
    const next = new Map(partitions.map((p) => [p, 0n]));
    const deadline = Date.now() + (options.timeoutMs ?? 10_000);
    let lingerUntil: number | undefined;
    while (Date.now() < (lingerUntil ?? deadline)) {
      let progressed = false;
      for (const partition of partitions) {
        const leader = cluster.findLeaderForPartitions(topic, [partition]);
        const nodeId = Object.keys(leader)[0];
        if (nodeId === undefined) continue;
        const broker = await cluster.findBroker({ nodeId });
        const fetchOffset = next.get(partition) ?? 0n;
        const response = await broker.fetch({
          replicaId: -1,
          isolationLevel: options.readUncommitted ? 0 : 1,
          maxWaitTime: 50,
          minBytes: 1,
          maxBytes: 50 * 1024 * 1024,
          topics: [
            {
              topic,
              partitions: [{ partition, fetchOffset: String(fetchOffset), maxBytes: 10 * 1024 * 1024 }],
            },
          ],
        });
        const data = response.responses[0]?.partitions[0];
        if (data === undefined || data.messages.length === 0) continue;
        const aborted = [...(data.abortedTransactions ?? [])].sort((a, b) =>
          BigInt(a.firstOffset) < BigInt(b.firstOffset) ? -1 : 1,
        );
        const abortedProducers = new Set<string>();
        let position = fetchOffset;
        for (const batch of groupBatches(data.messages)) {
          const context = batch[0]!.batchContext;
          const lastOffset = BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta);
          if (lastOffset + 1n > position) position = lastOffset + 1n;
          while (aborted.length > 0 && BigInt(aborted[0]!.firstOffset) <= lastOffset) {
            abortedProducers.add(aborted.shift()!.producerId);
          }
          if (batch[0]!.isControlRecord) {
            const isAbort = batch[0]!.key !== null && Buffer.from(batch[0]!.key).readInt16BE(2) === 0;
            if (isAbort) abortedProducers.delete(context.producerId);
            continue;
          }
          if (!options.readUncommitted && context.inTransaction && abortedProducers.has(context.producerId))
            continue;
          for (const m of batch) {
            if (BigInt(m.offset) < fetchOffset) continue;
            const headers: Record<string, string> = {};
            for (const [k, v] of Object.entries(m.headers ?? {})) headers[k] = String(v);
            records.push({
              partition,
              offset: m.offset,
              key: m.key?.toString() ?? null,
              value: m.value?.toString() ?? null,
              headers,
            });
          }
        }
        if (position > fetchOffset) progressed = true;
        next.set(partition, position);
      }
      if (options.expected !== undefined && records.length >= options.expected && lingerUntil === undefined) {
        lingerUntil = Date.now() + 1000;
      }
      if (!progressed) await sleep(100);
    }
  } finally {
    await cluster.disconnect();
  }
  return records;
}

function groupBatches(messages: RawBatchRecord[]): RawBatchRecord[][] {
  const batches: RawBatchRecord[][] = [];
  for (const m of messages) {
    const last = batches.at(-1);
    if (last !== undefined && last[0]!.batchContext.firstOffset === m.batchContext.firstOffset) last.push(m);
    else batches.push([m]);
  }
  return batches;
}

interface TestCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number }>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(query: { nodeId: string }): Promise<{
    fetch(request: object): Promise<{
      responses: Array<{
        partitions: Array<{
          messages: RawBatchRecord[];
          abortedTransactions?: Array<{ producerId: string; firstOffset: string }>;
        }>;
      }>;
    }>;
  }>;
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
