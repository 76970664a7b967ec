import type { KafkaSink } from "@onceflow/connector-kafka";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { gatedDeferredSink } from "../../packages/core/test/explore/gated-sink.js";
import type { SinkUnderTest } from "../../packages/core/test/explore/sink-under-test.js";
import { uniqueName } from "../kafka/helpers/kafka.js";
import { connectorOfProcess } from "./connector-per-process.js";

/**
 * The real {@link KafkaSink} (exactly-once) on the shared broker, a fresh one-partition topic per
 * case, each sink instance behind its process's gate and loaded per process. Visible is what a
 * `read_committed` reader (the testkit's, which applies the Java client's rule) reads. A transaction
 * left open blocks that reader at the last stable offset, so it shows as missing records; Kafka has
 * no cheap "what is still open" question, so no leftovers are listed.
 *
 * @example
 * ```ts
 * await explore({ target: () => kafkaSinkUnderTest(brokers), runs: 5 });
 * ```
 */
export async function kafkaSinkUnderTest(brokers: readonly string[]): Promise<SinkUnderTest> {
  const topic = uniqueName("explore");
  await createKafkaTopic(brokers, topic, { partitions: 1 });
  return {
    name: "kafka",
    // A real broker on a loaded 2-core machine: a final phase takes seconds, not milliseconds.
    finalPhaseLimitMs: 60_000,
    createSink(host) {
      const making = connectorOfProcess<{ KafkaSink: typeof KafkaSink }>(
        "@onceflow/connector-kafka",
        host.name,
      ).then(
        ({ KafkaSink: KafkaSinkOfProcess }) =>
          new KafkaSinkOfProcess<number>({
            brokers: [...brokers],
            clientId: `${topic}-${host.name}`,
            topic,
            value: { serialize: (value) => String(value) },
            deliveryGuarantee: "exactly-once",
            transactionalIdPrefix: topic,
            transactionTimeout: 900_000,
            commitRetry: { maxAttempts: 3, initialDelay: 10 },
          }),
      );
      return gatedDeferredSink(making, host.gate);
    },
    async visible() {
      return (await readCommittedKafkaRecords(brokers, topic, { timeoutMs: 10_000 })).map((record) =>
        Number(record.value),
      );
    },
    async leftovers() {
      return [];
    },
  };
}
