// A hand-written kafkajs transactional loop, as people write it today: eachBatch, send the batch in
// a transaction, sendOffsets, commit — one transaction per fetched batch.
//   node kafkajs-loop.mjs <brokers> <input> <output> <expected> <transactional id>
import { Kafka, logLevel } from "kafkajs";
import { createReport } from "./report.mjs";

const [brokerList, input, output, expectedText, transactionalId] = process.argv.slice(2);
const expected = Number(expectedText);
const kafka = new Kafka({
  brokers: brokerList.split(","),
  clientId: "bench-loop",
  logLevel: logLevel.NOTHING,
});
const report = createReport();
const groupId = `${transactionalId}-group`;
const consumer = kafka.consumer({ groupId, readUncommitted: false, maxBytes: 16 * 1024 * 1024 });
const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
await Promise.all([consumer.connect(), producer.connect()]);
await consumer.subscribe({ topic: input, fromBeginning: true });
let resolveDone;
const done = new Promise((resolve) => {
  resolveDone = resolve;
});
await consumer.run({
  autoCommit: false,
  eachBatch: async ({ batch }) => {
    if (batch.messages.length === 0) return;
    const transaction = await producer.transaction();
    try {
      await transaction.send({
        topic: output,
        messages: batch.messages.map((m) => ({ key: m.key, value: m.value })),
      });
      const next = (BigInt(batch.lastOffset()) + 1n).toString();
      await transaction.sendOffsets({
        consumerGroupId: groupId,
        topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
      });
      await transaction.commit();
    } catch (error) {
      await transaction.abort();
      throw error;
    }
    report.processed(batch.messages.length);
    if (report.records() >= expected) resolveDone();
  },
});
await done;
await consumer.disconnect();
await producer.disconnect();
await report.doneAndWait();
