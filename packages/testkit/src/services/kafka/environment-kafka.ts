import { faultInjectionUnsupported, serviceUnavailable } from "../../errors/service-errors.js";
import type { ProbeResult } from "../providers/provider-selection.js";
import { SHARED_MARKERS, userProvided } from "../shared-markers.js";
import { type CreateTopicOptions, createKafkaTopic, waitUntilKafkaServes } from "./kafka-admin.js";
import type { KafkaService } from "./kafka-service.js";

/**
 * The variable naming an existing broker: comma-separated `host:port` bootstrap addresses.
 *
 * @example
 * ```ts
 * process.env[KAFKA_BROKERS_VARIABLE] = "127.0.0.1:9092";
 * ```
 */
export const KAFKA_BROKERS_VARIABLE = "ONCEFLOW_KAFKA_BROKERS";

/**
 * The bootstrap addresses in `ONCEFLOW_KAFKA_BROKERS`, or none. A value the testkit's own global setup
 * exported (the run's shared broker) does not count: it is not a user-provided service.
 *
 * @example
 * ```ts
 * brokersFromEnvironment({ ONCEFLOW_KAFKA_BROKERS: "a:9092, b:9092" }); // ["a:9092", "b:9092"]
 * ```
 */
export function brokersFromEnvironment(env: NodeJS.ProcessEnv): string[] {
  return (userProvided(env, KAFKA_BROKERS_VARIABLE, SHARED_MARKERS.kafka) ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
}

/**
 * Whether the environment names a broker. Pure: it does not connect.
 *
 * @example
 * ```ts
 * probeKafkaEnvironment(process.env).available;
 * ```
 */
export function probeKafkaEnvironment(env: NodeJS.ProcessEnv): ProbeResult {
  const brokers = brokersFromEnvironment(env);
  return {
    provider: "environment",
    available: brokers.length > 0,
    detail:
      brokers.length > 0
        ? `${KAFKA_BROKERS_VARIABLE}=${brokers.join(",")}`
        : `${KAFKA_BROKERS_VARIABLE} is not set (or names the run's shared broker)`,
    remedy: `set ${KAFKA_BROKERS_VARIABLE}=host:port[,host:port] to a running broker (3.9+ with transactions enabled)`,
  };
}

/**
 * Uses the broker named by `ONCEFLOW_KAFKA_BROKERS`. It must answer: a named broker that does not is
 * an error, not a reason to start another one. kill/start throw (the testkit does not own it); stop
 * only forgets it.
 *
 * @example
 * ```ts
 * const kafka = await useEnvironmentKafka(["broker:9092"], "unknown", 30_000);
 * ```
 */
export async function useEnvironmentKafka(
  brokers: readonly string[],
  version: string,
  timeoutMs: number,
): Promise<KafkaService> {
  const problem = await waitUntilKafkaServes(brokers, timeoutMs);
  if (problem !== undefined) {
    throw serviceUnavailable(
      `${KAFKA_BROKERS_VARIABLE}=${brokers.join(",")} names a broker that does not serve: ${problem}. ` +
        `Start it, or unset ${KAFKA_BROKERS_VARIABLE} to let the testkit start one.`,
      { brokers },
    );
  }
  return {
    brokers,
    version,
    provider: "environment",
    pid: undefined,
    workDir: undefined,
    sasl: undefined,
    createTopic: (name: string, options: CreateTopicOptions) => createKafkaTopic(brokers, name, options),
    kill: () => Promise.reject(faultInjectionUnsupported("Kafka", "kill()", KAFKA_BROKERS_VARIABLE)),
    start: () => Promise.reject(faultInjectionUnsupported("Kafka", "start()", KAFKA_BROKERS_VARIABLE)),
    stop: () => Promise.resolve(),
  };
}
