import { ConfigurationError, type Logger } from "@onceflow/core";
import type { Kafka } from "kafkajs";

/**
 * Checks an exactly-once sink's `transactionTimeout` before its first transaction: it must be above
 * the checkpoint interval (else every transaction times out before its checkpoint completes) and at
 * most every broker's `transaction.max.timeout.ms` (read with DescribeConfigs; when ACLs deny that,
 * it warns and goes on — InitProducerId still rejects a too-long timeout). Throws a
 * `ConfigurationError` that says what to change.
 *
 * @example
 * ```ts
 * await checkTransactionTimeout(kafka, { transactionTimeout: 900_000, checkpointInterval: 10_000, logger });
 * ```
 */
export async function checkTransactionTimeout(
  kafka: Kafka,
  options: {
    readonly transactionTimeout: number;
    readonly checkpointInterval: number | undefined;
    readonly logger: Logger;
  },
): Promise<void> {
  const { transactionTimeout, checkpointInterval: interval } = options;
  if (interval !== undefined && transactionTimeout <= interval) {
    throw new ConfigurationError(
      "transactionTimeout",
      `${transactionTimeout} ms is not above the checkpoint interval (${interval} ms): every transaction would time out before its checkpoint completes. Set transactionTimeout well above the interval plus the longest expected downtime (for example 15 min)`,
    );
  }
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { brokers } = await admin.describeCluster();
    const resources = brokers.map((b) => ({
      type: 4, // ConfigResourceTypes.BROKER
      name: String(b.nodeId),
      configNames: ["transaction.max.timeout.ms"],
    }));
    const { resources: described } = await admin.describeConfigs({ resources, includeSynonyms: false });
    for (const resource of described) {
      const max = Number(
        resource.configEntries.find((e) => e.configName === "transaction.max.timeout.ms")?.configValue,
      );
      if (Number.isFinite(max) && transactionTimeout > max) {
        throw new ConfigurationError(
          "transactionTimeout",
          `${transactionTimeout} ms is above transaction.max.timeout.ms of broker ${resource.resourceName} (${max} ms): lower transactionTimeout to at most ${max}, or raise transaction.max.timeout.ms on the brokers`,
        );
      }
    }
  } catch (error) {
    if (error instanceof ConfigurationError) throw error;
    options.logger.warn(
      { error: (error as Error).message },
      "could not read transaction.max.timeout.ms from the brokers; transactionTimeout not checked",
    );
  } finally {
    await admin.disconnect();
  }
}
