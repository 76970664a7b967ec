import { setTimeout as sleep } from "node:timers/promises";
import { OnceflowError } from "@onceflow/core";
import type { Admin } from "kafkajs";
import { loadKafkajs } from "./kafkajs-loader.js";

/**
 * Options of {@link createKafkaTopic} and of a service's `createTopic`.
 *
 * @example
 * ```ts
 * await kafka.createTopic("events", { partitions: 4, config: { "cleanup.policy": "compact" } });
 * ```
 */
export interface CreateTopicOptions {
  /** Number of partitions. */
  partitions: number;
  /** Topic configuration, e.g. `{ "cleanup.policy": "compact" }`. */
  config?: Record<string, string>;
}

async function adminClient(brokers: readonly string[], clientId: string, connectionTimeout = 3000) {
  const { Kafka, logLevel } = await loadKafkajs();
  // logLevel NOTHING: kafkajs logs to the console by default, and the testkit must not.
  return new Kafka({
    clientId,
    brokers: [...brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout,
    // A starting broker may accept a connection before it answers; do not wait the 30 s default.
    requestTimeout: 5_000,
    retry: { retries: 0 },
  }).admin();
}

/**
 * Creates a topic (replication factor 1) and waits until every partition has a leader that answers
 * ListOffsets for it — on a loaded machine the metadata names a leader a moment before that broker
 * serves the partition ("This server is not the leader for that topic-partition"), so a test that
 * reads offsets right after creating its topic could fail. Throws when the topic exists already:
 * name topics per test so that tests never read each other's records.
 *
 * @example
 * ```ts
 * await createKafkaTopic(kafka.brokers, `orders-${randomUUID()}`, { partitions: 3 });
 * ```
 */
export async function createKafkaTopic(
  brokers: readonly string[],
  name: string,
  options: CreateTopicOptions,
): Promise<void> {
  const { Kafka, logLevel } = await loadKafkajs();
  const admin = new Kafka({
    clientId: "onceflow-testkit-admin",
    brokers: [...brokers],
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const created = await admin.createTopics({
      // kafkajs' own wait gives up on UNKNOWN_TOPIC_OR_PARTITION, which a broker that has just
      // started answers for a moment: wait for the leaders below instead.
      waitForLeaders: false,
      topics: [
        {
          topic: name,
          numPartitions: options.partitions,
          replicationFactor: 1,
          configEntries: Object.entries(options.config ?? {}).map(([key, value]) => ({ name: key, value })),
        },
      ],
    });
    if (!created) {
      throw new OnceflowError(
        "CONFIGURATION",
        `topic "${name}" already exists; give each test its own topic name`,
        {
          details: { topic: name },
        },
      );
    }
    await waitForLeaders(admin, name, options.partitions);
  } finally {
    await admin.disconnect();
  }
  await waitForListOffsets(brokers, name, options.partitions);
}

const LEADER_WAIT_MS = 30_000;

async function waitForLeaders(admin: Admin, topic: string, partitions: number): Promise<void> {
  const deadline = Date.now() + LEADER_WAIT_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      const led = metadata.topics[0]?.partitions.filter((partition) => partition.leader >= 0) ?? [];
      if (led.length === partitions) return;
    } catch (error) {
      last = error;
    }
    await sleep(100);
  }
  throw new OnceflowError(
    "SERVICE_UNAVAILABLE",
    `topic "${topic}" has no leader for every partition after ${LEADER_WAIT_MS} ms`,
    {
      cause: last,
      details: { topic },
    },
  );
}

/**
 * Polls ListOffsets (earliest and latest of every partition) with a client that does not retry, so
 * that an answer means the partition leaders really serve the topic; until LEADER_WAIT_MS.
 */
async function waitForListOffsets(
  brokers: readonly string[],
  topic: string,
  partitions: number,
): Promise<void> {
  const deadline = Date.now() + LEADER_WAIT_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    const admin = await adminClient(brokers, "onceflow-testkit-offsets");
    try {
      await admin.connect();
      const offsets = await admin.fetchTopicOffsets(topic);
      if (offsets.length === partitions) return;
      last = new Error(`ListOffsets answered for ${offsets.length} of ${partitions} partitions`);
    } catch (error) {
      last = error;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    await sleep(100);
  }
  throw new OnceflowError(
    "SERVICE_UNAVAILABLE",
    `topic "${topic}": its partition leaders do not answer ListOffsets after ${LEADER_WAIT_MS} ms (last: ${(last as Error | undefined)?.message})`,
    { cause: last, details: { topic } },
  );
}

/**
 * Asks the brokers to describe the cluster once; resolves with a reason when they do not serve.
 *
 * @example
 * ```ts
 * const problem = await describeClusterOnce(["127.0.0.1:9092"]);
 * if (problem === undefined) console.log("serving");
 * ```
 */
export async function describeClusterOnce(brokers: readonly string[]): Promise<string | undefined> {
  // A missing kafkajs throws (CONFIGURATION): polling cannot fix it.
  const admin = await adminClient(brokers, "onceflow-testkit-probe");
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.length > 0 ? undefined : "the cluster has no registered broker yet";
  } catch (error) {
    return (error as Error).message;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * Waits until the brokers really serve (an admin client can describe the cluster), polling until
 * `timeoutMs`. `stillRunning` lets the caller stop early when the broker process died. Resolves
 * `undefined` when serving, else the last reason.
 *
 * @example
 * ```ts
 * const problem = await waitUntilKafkaServes(["127.0.0.1:9092"], 120_000, () => jvm.exitCode === null);
 * ```
 */
export async function waitUntilKafkaServes(
  brokers: readonly string[],
  timeoutMs: number,
  stillRunning: () => boolean = () => true,
): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  let problem: string | undefined = "not asked yet";
  while (Date.now() < deadline) {
    if (!stillRunning()) return `the broker process exited (last answer: ${problem})`;
    problem = await describeClusterOnce(brokers);
    if (problem === undefined) return undefined;
    await sleep(250);
  }
  return `no answer within ${timeoutMs} ms (last: ${problem})`;
}
