// Writes 100-byte records at a steady rate for a while; each value starts with the time (ms since
// the epoch) it was handed to the producer. A batch every 10 ms, round-robin over the partitions;
// record n is keyed `n % 1000` in decimal (the keyed candidates key by it, the others ignore it).
//   node latency-writer.mjs <brokers> <topic> <records per second> <seconds> <partitions>
// Prints {"event":"done","records":n,"seconds":s,"lateTicks":k,"cpuSeconds":c} (ticks that started
// more than 10 ms late: the writer, or the machine, could not keep the rate; c: this process's CPU
// time over the writing, user + system).
import { Kafka, logLevel } from "kafkajs";

const [brokerList, topic, rate, seconds, partitions] = process.argv.slice(2);
const kafka = new Kafka({
  brokers: brokerList.split(","),
  clientId: "latency-writer",
  logLevel: logLevel.NOTHING,
});
const producer = kafka.producer({ allowAutoTopicCreation: false });
await producer.connect();
const TICK_MS = 10;
const perTick = Math.max(1, Math.round((Number(rate) * TICK_MS) / 1000));
const ticks = Math.round((Number(seconds) * 1000) / TICK_MS);
const started = Date.now();
const cpuBefore = process.cpuUsage();
let records = 0;
let lateTicks = 0;
const inFlight = new Set();
const KEYS = Array.from({ length: 1000 }, (_, key) => Buffer.from(String(key)));
for (let tick = 0; tick < ticks; tick++) {
  const due = started + tick * TICK_MS;
  const wait = due - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  else if (wait < -TICK_MS) lateTicks++;
  const now = Date.now();
  const value = Buffer.from(`${now}`.padEnd(100, "x"));
  const byPartition = Array.from({ length: Number(partitions) }, () => []);
  for (let i = 0; i < perTick; i++)
    byPartition[(records + i) % byPartition.length].push({ key: KEYS[(records + i) % KEYS.length], value });
  records += perTick;
  // Not awaited one by one: a slow acknowledgement must not hold the next tick back.
  const sent = producer.sendBatch({
    acks: -1,
    topicMessages: [
      {
        topic,
        messages: byPartition.flatMap((messages, partition) => messages.map((m) => ({ ...m, partition }))),
      },
    ],
  });
  inFlight.add(sent);
  sent.finally(() => inFlight.delete(sent));
  if (inFlight.size > 20) await Promise.race(inFlight);
}
await Promise.all(inFlight);
const took = (Date.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
await producer.disconnect();
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
process.stdout.write(`${JSON.stringify({ event: "done", records, seconds: took, lateTicks, cpuSeconds })}\n`);
