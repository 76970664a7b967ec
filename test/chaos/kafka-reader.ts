import { Kafka, logLevel } from "kafkajs";

// The chaos suite's independent reader of a transactional topic: raw Fetch requests with
// isolation_level=read_committed, filtering aborted transactions with the Java consumer's rule
// (kafkajs' own consumer gets this wrong when transactions of several producers interleave, which
// every restart of a killed job produces). Neither onceflow's source nor kafkajs' consumer is used.

/** One committed record. */
export interface CommittedRecord {
  readonly partition: number;
  readonly offset: bigint;
  readonly key: string | null;
  readonly value: string | null;
}

interface RawRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  isControlRecord: boolean;
  batchContext: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

interface RawCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number }>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(query: { nodeId: string }): Promise<{
    fetch(request: object): Promise<{
      responses: Array<{
        partitions: Array<{
          messages: RawRecord[];
          abortedTransactions?: Array<{ producerId: string; firstOffset: string }>;
        }>;
      }>;
    }>;
  }>;
}

/**
 * Everything committed in `topic` up to its last stable offsets: reads each partition until a
 * Fetch brings nothing new (an open transaction holds the last stable offset back, so its records
 * are not read, committed or not yet).
 */
export async function readCommittedRecords(brokers: string[], topic: string): Promise<CommittedRecord[]> {
  const kafka = new Kafka({ brokers, clientId: "onceflow-chaos-reader", logLevel: logLevel.NOTHING });
  // kafkajs has no public low-level Fetch: its cluster is reached through a private symbol.
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === "private:Kafka:createCluster",
  );
  if (symbol === undefined) throw new Error("kafkajs internals changed: no private:Kafka:createCluster");
  const createCluster = (kafka as unknown as Record<symbol, (options: object) => RawCluster>)[symbol];
  const cluster = (createCluster as (options: object) => RawCluster).call(kafka, {});
  await cluster.connect();
  const records: CommittedRecord[] = [];
  try {
    await cluster.addTargetTopic(topic);
    for (const { partitionId: partition } of cluster.findTopicPartitionMetadata(topic)) {
      let position = 0n;
      for (;;) {
        const nodeId = Object.keys(cluster.findLeaderForPartitions(topic, [partition]))[0];
        if (nodeId === undefined) throw new Error(`${topic}/${partition} has no leader`);
        const broker = await cluster.findBroker({ nodeId });
        const response = await broker.fetch({
          replicaId: -1,
          isolationLevel: 1,
          maxWaitTime: 0,
          minBytes: 0,
          maxBytes: 50 * 1024 * 1024,
          topics: [
            { topic, partitions: [{ partition, fetchOffset: String(position), maxBytes: 10 * 1024 * 1024 }] },
          ],
        });
        const data = response.responses[0]?.partitions[0];
        if (data === undefined || data.messages.length === 0) break;
        const aborted = [...(data.abortedTransactions ?? [])].sort((a, b) =>
          BigInt(a.firstOffset) < BigInt(b.firstOffset) ? -1 : 1,
        );
        const abortedProducers = new Set<string>();
        const start = position;
        for (const batch of batches(data.messages)) {
          const first = batch[0] as RawRecord;
          const context = first.batchContext;
          const lastOffset = BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta);
          if (lastOffset + 1n > position) position = lastOffset + 1n;
          // The Java consumer's rule: an aborted transaction starts at its first offset and ends at
          // the producer's abort marker; records of that producer in between are skipped.
          while (
            aborted.length > 0 &&
            BigInt((aborted[0] as { firstOffset: string }).firstOffset) <= lastOffset
          )
            abortedProducers.add((aborted.shift() as { producerId: string }).producerId);
          if (first.isControlRecord) {
            const isAbort = first.key !== null && Buffer.from(first.key).readInt16BE(2) === 0;
            if (isAbort) abortedProducers.delete(context.producerId);
            continue;
          }
          if (context.inTransaction && abortedProducers.has(context.producerId)) continue;
          for (const record of batch) {
            const offset = BigInt(record.offset);
            if (offset < start) continue;
            records.push({
              partition,
              offset,
              key: record.key?.toString() ?? null,
              value: record.value?.toString() ?? null,
            });
          }
        }
        if (position === start) break;
      }
    }
  } finally {
    await cluster.disconnect();
  }
  return records;
}

function batches(records: RawRecord[]): RawRecord[][] {
  const grouped: RawRecord[][] = [];
  for (const record of records) {
    const last = grouped.at(-1);
    if (last !== undefined && last[0]?.batchContext.firstOffset === record.batchContext.firstOffset)
      last.push(record);
    else grouped.push([record]);
  }
  return grouped;
}
