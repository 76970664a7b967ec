import { connect as connectTcp, type Socket } from "node:net";
import { type KafkaRecord, KafkaSource } from "@onceflow/connector-kafka";
import { describeSource, type SourceContract, type SourceContractScope } from "@onceflow/testkit/vitest";
import { Kafka, logLevel } from "kafkajs";
import { createTopic, deleteTopics, kafkaBrokers } from "./helpers/services.js";

// The source contract suite on KafkaSource against the run's broker: one topic per case with one
// partition per split, written with a plain producer. The reader commits the checkpointed offsets
// to its consumer group on completion: the group's committed offsets are the commit-back the suite
// holds against the completed checkpoints. Each case's clients open their sockets through a
// factory that tracks them: a socket the source never ended after close() is a leak.

const socketsOf = new Map<string, Set<Socket>>();

function trackedKafka(scope: SourceContractScope): Kafka {
  let sockets = socketsOf.get(scope.id);
  if (sockets === undefined) {
    sockets = new Set();
    socketsOf.set(scope.id, sockets);
  }
  const tracked = sockets;
  return new Kafka({
    brokers: kafkaBrokers(),
    clientId: `contract-${scope.id}`,
    logLevel: logLevel.NOTHING,
    socketFactory: ({ host, port, onConnect }) => {
      const socket = connectTcp({ host, port }, onConnect);
      tracked.add(socket);
      return socket;
    },
  });
}

const groupOf = (scope: SourceContractScope) => `group-${scope.id}`;

async function withAdmin<R>(work: (admin: ReturnType<Kafka["admin"]>) => Promise<R>): Promise<R> {
  const admin = new Kafka({
    brokers: kafkaBrokers(),
    clientId: "contract-admin",
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.disconnect();
  }
}

function contractOf(boundedness: "bounded" | "continuous"): SourceContract<KafkaRecord> {
  return {
    name: `KafkaSource (${boundedness})`,
    setup: (scope) => createTopic(kafkaBrokers(), scope.id, scope.splits),
    teardown: async (scope) => {
      socketsOf.delete(scope.id);
      await deleteTopics(kafkaBrokers(), [scope.id]);
    },
    writeInput: async (scope, split, records) => {
      const producer = new Kafka({
        brokers: kafkaBrokers(),
        clientId: "contract-input",
        logLevel: logLevel.NOTHING,
      }).producer();
      await producer.connect();
      try {
        await producer.send({
          topic: scope.id,
          acks: -1,
          messages: records.map((record) => ({ partition: split, value: record.value })),
        });
      } finally {
        await producer.disconnect();
      }
    },
    createSource: (scope) =>
      new KafkaSource({
        kafka: trackedKafka(scope),
        topics: [scope.id],
        groupId: groupOf(scope),
        startingOffsets: "earliest",
        partitionDiscoveryIntervalMs: 0,
        ...(boundedness === "bounded" ? { stoppingOffsets: "latest" as const } : {}),
      }),
    createRecord: (index) =>
      ({
        topic: "",
        partition: 0,
        offset: "0",
        timestamp: 0,
        key: null,
        value: `record-${index}`,
        headers: {},
        headerList: [],
      }) satisfies KafkaRecord,
    identify: (record) => record.value ?? "<null>",
    // The topic holds only the suite's records from offset 0: a committed offset is a record count.
    committedPositions: (scope) =>
      withAdmin(async (admin) => {
        const [topic] = await admin.fetchOffsets({ groupId: groupOf(scope), topics: [scope.id] });
        const counts = new Array<number>(scope.splits).fill(0);
        for (const { partition, offset } of topic?.partitions ?? [])
          counts[partition] = Math.max(0, Number(offset));
        return counts;
      }),
    lingering: (scope) =>
      [...(socketsOf.get(scope.id) ?? [])]
        .filter((socket) => !socket.destroyed && !socket.writableEnded)
        .map((socket) => `open socket to ${socket.remoteAddress}:${socket.remotePort}`),
    timeout: 180_000,
  };
}

describeSource(contractOf("continuous"));
describeSource(contractOf("bounded"));
