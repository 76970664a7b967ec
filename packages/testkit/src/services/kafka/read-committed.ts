import { setTimeout as sleep } from "node:timers/promises";
import { OnceflowError } from "@onceflow/core";
import type { Kafka } from "kafkajs";
import { loadKafkajs } from "./kafkajs-loader.js";

/**
 * One committed record, as {@link readCommittedKafkaRecords} returns it.
 *
 * @example
 * ```ts
 * const record: CommittedKafkaRecord = { partition: 0, offset: "12", key: "k", value: "v", headers: {} };
 * ```
 */
export interface CommittedKafkaRecord {
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly value: string | null;
  readonly headers: Readonly<Record<string, string>>;
}

interface RawRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | Buffer[]>;
  isControlRecord: boolean;
  batchContext: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

interface RawCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(query: { nodeId: string }): Promise<{
    fetch(request: object): Promise<{
      responses: Array<{
        partitions: Array<{
          messages: RawRecord[];
          highWatermark?: string;
          lastStableOffset?: string;
          abortedTransactions?: Array<{ producerId: string; firstOffset: string }>;
        }>;
      }>;
    }>;
  }>;
}

/**
 * Reads every record of `topic` that is committed now, as a Java consumer with
 * `isolation.level=read_committed` would: up to each partition's last stable offset, leaving out
 * records of aborted transactions. Use it as the independent reader that checks exactly-once output.
 *
 * It does not use kafkajs' consumer: kafkajs 2.2.4 lets aborted records through when transactions
 * of several producers interleave (it assumes the broker's list of aborted transactions is sorted
 * and consumes it wrongly). This reader sends Fetch requests itself and applies the Java client's
 * rule per record batch; it is the one place in the testkit that uses kafkajs internals.
 *
 * @example
 * ```ts
 * const records = await readCommittedKafkaRecords(kafka.brokers, "orders-out");
 * expect(records.map((record) => record.value).sort()).toEqual(expected);
 * ```
 */
export async function readCommittedKafkaRecords(
  brokers: readonly string[],
  topic: string,
  options: {
    timeoutMs?: number;
    /** `read_uncommitted` reads what is written, aborted and open transactions included (default `read_committed`). */
    isolation?: "read_committed" | "read_uncommitted";
  } = {},
): Promise<CommittedKafkaRecord[]> {
  const committedOnly = (options.isolation ?? "read_committed") === "read_committed";
  const { Kafka, logLevel } = await loadKafkajs();
  const kafka = new Kafka({
    brokers: [...brokers],
    clientId: "onceflow-testkit-reader",
    logLevel: logLevel.NOTHING,
  });
  const ends = committedOnly
    ? await settledLastStableOffsets(kafka, topic)
    : await endlessOffsets(kafka, topic);
  const cluster = rawCluster(kafka);
  await cluster.connect();
  const records: CommittedKafkaRecord[] = [];
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  try {
    await cluster.addTargetTopic(topic);
    for (const [partition, end] of ends) {
      let position = 0n;
      while (position < end) {
        if (Date.now() > deadline) {
          throw new OnceflowError(
            "SERVICE_UNAVAILABLE",
            `reading ${topic} partition ${partition} stopped at offset ${position} of ${end}: timed out`,
          );
        }
        const next = await fetchRecords(cluster, topic, partition, position, committedOnly, records);
        if (next === position) {
          // Uncommitted reads end where the log ends; committed ones at the last stable offset.
          if (!committedOnly) break;
          await sleep(50);
        }
        position = next;
      }
    }
  } finally {
    await cluster.disconnect();
  }
  return records.filter((record) => BigInt(record.offset) < (ends.get(record.partition) ?? 0n));
}

async function endlessOffsets(kafka: Kafka, topic: string): Promise<Map<number, bigint>> {
  const partitions = await lastStableOffsets(kafka, topic);
  return new Map([...partitions.keys()].map((partition) => [partition, BigInt(Number.MAX_SAFE_INTEGER)]));
}

// A commit returns before the broker has written its markers to every partition; until then the
// last stable offset stays below the committed records. Settled: the last stable offset reached
// the end of the log (no transaction open), or stopped moving for a while (one stays open). The
// markers of a busy broker (a loaded machine, a container) can take well over 100 ms.
const OPEN_TRANSACTION_SETTLE_MS = 1_000;

async function settledLastStableOffsets(kafka: Kafka, topic: string): Promise<Map<number, bigint>> {
  const listed = await lastStableOffsets(kafka, topic);
  const cluster = rawCluster(kafka);
  await cluster.connect();
  try {
    await cluster.addTargetTopic(topic);
    const stable = (ends: Map<number, LogEnd>) =>
      new Map([...ends].map(([partition, end]) => [partition, end.stable]));
    let previous = await logEnds(cluster, topic, listed);
    let unchangedSince = Date.now();
    for (let round = 0; round < 50; round++) {
      if ([...previous.values()].every((end) => end.stable === end.end)) break;
      await sleep(100);
      const current = await logEnds(cluster, topic, stable(previous));
      if ([...current].some(([partition, end]) => previous.get(partition)?.stable !== end.stable)) {
        unchangedSince = Date.now();
      } else if (Date.now() - unchangedSince >= OPEN_TRANSACTION_SETTLE_MS) {
        previous = current;
        break;
      }
      previous = current;
    }
    return stable(previous);
  } finally {
    await cluster.disconnect();
  }
}

interface LogEnd {
  /** The last stable offset: what read_committed may read up to. */
  stable: bigint;
  /** The high watermark: the end of the log, open transactions included. */
  end: bigint;
}

/** Each partition's last stable offset and high watermark, from a Fetch of (almost) nothing. */
async function logEnds(
  cluster: RawCluster,
  topic: string,
  from: Map<number, bigint>,
): Promise<Map<number, LogEnd>> {
  const ends = new Map<number, LogEnd>();
  for (const [partition, offset] of from) {
    const leader = Object.keys(cluster.findLeaderForPartitions(topic, [partition]))[0];
    if (leader === undefined)
      throw new OnceflowError("SERVICE_UNAVAILABLE", `${topic} partition ${partition} has no leader`);
    const broker = await cluster.findBroker({ nodeId: leader });
    const response = await broker.fetch({
      replicaId: -1,
      isolationLevel: 1,
      maxWaitTime: 0,
      minBytes: 0,
      maxBytes: 1,
      topics: [{ topic, partitions: [{ partition, fetchOffset: String(offset), maxBytes: 1 }] }],
    });
    const data = response.responses[0]?.partitions[0];
    if (data?.highWatermark === undefined || data.lastStableOffset === undefined) {
      ends.set(partition, { stable: offset, end: offset });
      continue;
    }
    const end = BigInt(data.highWatermark);
    // Brokers answer -1 when the partition has no transactional state.
    const stable = BigInt(data.lastStableOffset) < 0n ? end : BigInt(data.lastStableOffset);
    ends.set(partition, { stable, end });
  }
  return ends;
}

async function lastStableOffsets(kafka: Kafka, topic: string): Promise<Map<number, bigint>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    // kafkajs reports the last stable offset as `high` (it lists offsets with read_committed).
    const offsets = await admin.fetchTopicOffsets(topic);
    return new Map(offsets.map((offset) => [offset.partition, BigInt(offset.high)]));
  } finally {
    await admin.disconnect();
  }
}

function rawCluster(kafka: Kafka): RawCluster {
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    (each) => each.description === "private:Kafka:createCluster",
  );
  if (symbol === undefined) throw new Error("kafkajs internals changed: no private:Kafka:createCluster");
  const createCluster = (kafka as unknown as Record<symbol, (options: object) => RawCluster>)[symbol]!;
  return createCluster.call(kafka, {});
}

// One Fetch from `position`; appends the data records it may show, returns the next position.
async function fetchRecords(
  cluster: RawCluster,
  topic: string,
  partition: number,
  position: bigint,
  committedOnly: boolean,
  records: CommittedKafkaRecord[],
): Promise<bigint> {
  const leader = Object.keys(cluster.findLeaderForPartitions(topic, [partition]))[0];
  if (leader === undefined) return position;
  const broker = await cluster.findBroker({ nodeId: leader });
  const response = await broker.fetch({
    replicaId: -1,
    isolationLevel: committedOnly ? 1 : 0,
    maxWaitTime: 50,
    minBytes: 1,
    maxBytes: 50 * 1024 * 1024,
    topics: [
      { topic, partitions: [{ partition, fetchOffset: String(position), maxBytes: 10 * 1024 * 1024 }] },
    ],
  });
  const data = response.responses[0]?.partitions[0];
  if (data === undefined || data.messages.length === 0) return position;
  const aborted = [...(data.abortedTransactions ?? [])].sort((a, b) =>
    BigInt(a.firstOffset) < BigInt(b.firstOffset) ? -1 : 1,
  );
  const abortedProducers = new Set<string>();
  let next = position;
  for (const batch of recordBatches(data.messages)) {
    const context = batch[0]!.batchContext;
    const lastOffset = BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta);
    if (lastOffset + 1n > next) next = lastOffset + 1n;
    while (aborted.length > 0 && BigInt(aborted[0]!.firstOffset) <= lastOffset) {
      abortedProducers.add(aborted.shift()!.producerId);
    }
    if (batch[0]!.isControlRecord) {
      // Control record key: version (int16) then type (int16): 0 = abort, 1 = commit.
      const isAbort = batch[0]!.key !== null && Buffer.from(batch[0]!.key).readInt16BE(2) === 0;
      if (isAbort) abortedProducers.delete(context.producerId);
      continue;
    }
    if (committedOnly && context.inTransaction && abortedProducers.has(context.producerId)) continue;
    for (const record of batch) {
      if (BigInt(record.offset) < position) continue;
      const headers: Record<string, string> = {};
      for (const [key, value] of Object.entries(record.headers ?? {})) headers[key] = String(value);
      records.push({
        partition,
        offset: record.offset,
        key: record.key?.toString() ?? null,
        value: record.value?.toString() ?? null,
        headers,
      });
    }
  }
  return next;
}

function recordBatches(messages: RawRecord[]): RawRecord[][] {
  const batches: RawRecord[][] = [];
  for (const message of messages) {
    const last = batches.at(-1);
    if (last !== undefined && last[0]!.batchContext.firstOffset === message.batchContext.firstOffset)
      last.push(message);
    else batches.push([message]);
  }
  return batches;
}
