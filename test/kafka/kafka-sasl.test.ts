import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaSink, KafkaSource, responseSocketFactory } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
import type { KafkaSaslListener } from "@onceflow/testkit";
import { usePrivateKafka } from "@onceflow/testkit/vitest";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { readAll, uniqueName } from "./helpers/kafka.js";

// A kafkajs client of the user's own that authenticates (SASL PLAIN over plain TCP). On Kafka ≥ 1.0
// kafkajs authenticates with ordinary SaslHandshake and SaslAuthenticate requests, so on the
// source's Fetch connection their responses, then the Fetch responses, go through the connector's
// reader (whole-responses.ts); with responseSocketFactory the socket reads them whole as well
// (response-socket.ts). Values of 400 bytes make Fetch responses span many socket reads.
const kafka = usePrivateKafka({ saslPlain: true });

function saslListener(): KafkaSaslListener {
  const sasl = kafka().sasl;
  if (sasl === undefined) throw new Error("the testkit broker was started without its SASL listener");
  return sasl;
}

function saslClient(options: { password?: string; socketFactory?: boolean } = {}): Kafka {
  const { brokers, username, password } = saslListener();
  return new Kafka({
    brokers: [...brokers],
    clientId: "onceflow-sasl-test",
    logLevel: logLevel.NOTHING,
    sasl: { mechanism: "plain", username, password: options.password ?? password },
    retry: { retries: options.password === undefined ? 5 : 0 },
    ...(options.socketFactory === true ? { socketFactory: responseSocketFactory() } : {}),
  });
}

async function runJob(client: Kafka, name: string): Promise<void> {
  const input = uniqueName(`${name}-in`);
  const output = uniqueName(`${name}-out`);
  await kafka().createTopic(input, { partitions: 2 });
  await kafka().createTopic(output, { partitions: 2 });
  const inputs = Array.from({ length: 6000 }, (_, i) => `${name}-${i}-`.padEnd(400, "x"));
  const producer = client.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    for (let from = 0; from < inputs.length; from += 1000) {
      await producer.send({
        topic: input,
        messages: inputs.slice(from, from + 1000).map((value, i) => ({ value, partition: i % 2 })),
      });
    }
  } finally {
    await producer.disconnect();
  }
  const dir = await mkdtemp(join(tmpdir(), "onceflow-kafka-sasl-"));
  try {
    const job = new Job({
      jobId: uniqueName(name),
      checkpointing: { interval: 200, storage: filesystem(dir) },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(
        new KafkaSource({
          kafka: client,
          topics: [input],
          startingOffsets: "earliest",
          stoppingOffsets: "latest",
        }),
        { uid: "in" },
      )
      .map((record) => record.value ?? "")
      .sinkTo(
        new KafkaSink<string>({
          kafka: client,
          topic: output,
          deliveryGuarantee: "exactly-once",
          transactionalIdPrefix: uniqueName(`${name}-txn`),
        }),
        { uid: "out" },
      );
    expect((await job.execute()).endedBy).toBe("end-of-input");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  // An independent reader on the broker's PLAINTEXT listener, read_committed.
  const records = await readAll(output, {
    expected: inputs.length,
    timeoutMs: 30_000,
    brokers: [...kafka().brokers],
  });
  const values = records.map((record) => record.value ?? "");
  expect(values.length).toBe(inputs.length);
  expect(new Set(values)).toEqual(new Set(inputs));
}

describe("Kafka → Kafka exactly-once with a kafkajs client that authenticates (SASL PLAIN)", {
  timeout: 180_000,
}, () => {
  it("the listener authenticates: a wrong password is refused", async () => {
    const admin = saslClient({ password: "not-the-password" }).admin();
    await expect(admin.connect()).rejects.toThrow(/SASL PLAIN authentication failed|Authentication failed/i);
    await admin.disconnect();
  });

  it("with kafkajs's own sockets: every input once in the output", async () => {
    await runJob(saslClient(), "sasl");
  });

  it("with responseSocketFactory's sockets: every input once in the output", async () => {
    await runJob(saslClient({ socketFactory: true }), "sasl-sockets");
  });
});
