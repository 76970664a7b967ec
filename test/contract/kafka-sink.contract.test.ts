import { KafkaSink } from "@onceflow/connector-kafka";
import type { TwoPhaseCommitSink } from "@onceflow/core";
// Until packages/testkit/src/index.ts re-exports the contract suite: then import from "@onceflow/testkit".
import { describeTwoPhaseCommitSink } from "../../packages/testkit/src/contract/index.js";
import {
  createTopic,
  deleteTopics,
  type KillableKafka,
  kafkaBrokers,
  killableKafka,
  readCommittedTopic,
} from "./helpers/services.js";

// The contract suite on KafkaSink (exactly-once) against the run's broker. Each case has its own
// topic and transactional-id prefix; each sink instance its own kafkajs client, so a simulated kill
// cuts exactly that instance's sockets (its open transaction stays open at the broker, as after a
// SIGKILL, until the next instance fences the ids).

const clients = new WeakMap<object, KillableKafka>();

describeTwoPhaseCommitSink<string>({
  name: "KafkaSink",
  setup: (scope) => createTopic(kafkaBrokers(), scope.id, 2),
  teardown: (scope) => deleteTopics(kafkaBrokers(), [scope.id]),
  createSink: (scope) => {
    const client = killableKafka(kafkaBrokers(), `contract-${scope.id}`);
    const sink = new KafkaSink<string>({
      kafka: client.kafka,
      topic: scope.id,
      key: { serialize: (value) => value },
      deliveryGuarantee: "exactly-once",
      transactionalIdPrefix: scope.id,
      transactionTimeout: 60_000,
      commitRetry: { initialDelay: 20, maxDelay: 500 },
    });
    clients.set(sink, client);
    return sink as unknown as TwoPhaseCommitSink<string, unknown>;
  },
  kill: (sink) => clients.get(sink)?.kill(),
  readCommitted: async (scope) =>
    (await readCommittedTopic(kafkaBrokers(), scope.id)).map((record) => record.value ?? "<null>"),
  createRecord: (index) => `record-${index}`,
  timeout: 90_000,
});
