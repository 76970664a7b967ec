// Sample input for the compose example: creates the topic (2 partitions) and writes ORDERS orders,
// keyed by order id, each order twice (version 1, then version 2), so the table ends with ORDERS / 2
// rows, all at version 2. Runs in the job image (kafkajs comes with @onceflow/connector-kafka).
import { Kafka, logLevel } from "kafkajs";

const brokers = (process.env.KAFKA_BROKERS ?? "kafka:9092").split(",");
const topic = process.env.KAFKA_TOPIC ?? "orders";
const count = Number(process.env.ORDERS ?? "1000");
const kafka = new Kafka({ clientId: "produce-orders", brokers, logLevel: logLevel.WARN });

// The broker may still be starting: try for a minute.
const admin = kafka.admin();
for (let attempt = 1; ; attempt++) {
  try {
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
    break;
  } catch (error) {
    if (attempt >= 60) throw error;
    await admin.disconnect().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}
await admin.disconnect();

const producer = kafka.producer({ idempotent: true });
await producer.connect();
const ids = count / 2;
for (const version of [1, 2]) {
  const messages = Array.from({ length: ids }, (_, index) => {
    const order = {
      id: `order-${index}`,
      version,
      status: version === 1 ? "new" : "paid",
      amountCents: index * 100,
    };
    return { key: order.id, value: JSON.stringify(order) };
  });
  await producer.send({ topic, messages });
}
await producer.disconnect();
console.log(`produced ${count} orders (${ids} ids × 2 versions) to ${topic}`);
