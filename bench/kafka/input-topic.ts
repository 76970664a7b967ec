// Topics the Kafka benchmarks read and write: created with all their partitions led, and their
// input written once, in chunks, round-robin over the partitions.
import type { Kafka } from "kafkajs";

/** Creates `name` with `partitions` partitions (replication 1) and waits for their leaders. */
export async function createTopic(kafka: Kafka, name: string, partitions: number): Promise<string> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: [{ topic: name, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
  return name;
}

/**
 * Writes records `0 … count − 1` to `topic`, record `i` to partition `i % partitions`, its key,
 * value and timestamp (ms, as a string; unset, the producer's clock) from `message(i)`.
 */
export async function writeInput(
  kafka: Kafka,
  topic: string,
  options: {
    count: number;
    partitions: number;
    message: (id: number) => { key?: string; value: string | Buffer; timestamp?: string };
  },
): Promise<void> {
  const { count, partitions, message } = options;
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    const chunk = 10_000;
    for (let i = 0; i < count; i += chunk) {
      const n = Math.min(chunk, count - i);
      const messages = Array.from({ length: n }, (_, j) => ({
        ...message(i + j),
        partition: (i + j) % partitions,
      }));
      await producer.sendBatch({ topicMessages: [{ topic, messages }] });
    }
  } finally {
    await producer.disconnect();
  }
}
