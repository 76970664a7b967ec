import { KafkaSink, listKafkaTransactions } from "@onceflow/connector-kafka";
import { OnceflowError } from "@onceflow/core";
import {
  describeTwoPhaseCommitSink,
  type TwoPhaseCommitSinkContract,
  twoPhaseCommitSinkContractCases,
} from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
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
// SIGKILL, until the next instance fences the ids). After each case no transaction of the case's
// prefix may still be open at the broker (ListTransactions: state Ongoing).

const clients = new WeakMap<object, KillableKafka>();

const contract: TwoPhaseCommitSinkContract<string, KafkaSink<string>> = {
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
      // Far above what one case takes on a loaded machine (over a minute was seen): the broker must
      // not abort a pre-committed transaction before the case's recovery commits it.
      transactionTimeout: 600_000,
      commitRetry: { initialDelay: 20, maxDelay: 500 },
    });
    clients.set(sink, client);
    return sink;
  },
  kill: async (sink) => {
    await clients.get(sink)?.kill();
    // The sink claims its prefix in a process-wide registry that a SIGKILL would wipe; close() is
    // the only way to drop it. The suite made every step of the dead instance throw: no abort runs.
    await sink.close();
  },
  readCommitted: async (scope) =>
    (await readCommittedTopic(kafkaBrokers(), scope.id)).map((record) => record.value ?? "<null>"),
  createRecord: (index) => `record-${index}`,
  lingering: async (scope) =>
    (
      await listKafkaTransactions({ brokers: kafkaBrokers(), prefix: `${scope.id}-`, states: ["Ongoing"] })
    ).map(
      (transaction) =>
        `open transaction ${transaction.transactionalId} (producerId ${transaction.producerId})`,
    ),
  timeout: 180_000,
  skip: {
    // Asserted separately below: with its pool of transactional ids the sink cannot commit an older
    // checkpoint's transaction once the id was reused, and it says so (TRANSACTION_FENCED).
    "restore-older-checkpoint": "KafkaSink fails loudly instead (TRANSACTION_FENCED), asserted below",
  },
};

describeTwoPhaseCommitSink(contract);

describe("KafkaSink and older checkpoints", () => {
  it("restoring a checkpoint older than a completed one fails loudly with TRANSACTION_FENCED that says to restore the latest, never silently", async () => {
    const testCase = twoPhaseCommitSinkContractCases({ ...contract, skip: {} }).find(
      (each) => each.id === "restore-older-checkpoint",
    );
    const error = await testCase!.run().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    // The case names itself and keeps the sink's error as its cause.
    expect((error as Error).message).toMatch(/^KafkaSink: restore-older-checkpoint: /);
    const cause = (error as Error).cause;
    expect(cause).toBeInstanceOf(OnceflowError);
    expect((cause as OnceflowError).code).toBe("TRANSACTION_FENCED");
    // …and says how to get going again.
    expect((cause as Error).message).toContain('restore: "latest"');
  }, 90_000);
});
