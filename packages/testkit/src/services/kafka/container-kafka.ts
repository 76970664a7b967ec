import { serviceUnavailable } from "../../errors/service-errors.js";
import { findFreePort } from "../../runtime/free-port.js";
import { controlContainer } from "../providers/container-control.js";
import { loadTestcontainers } from "../providers/testcontainers-loader.js";
import { testBrokerSettings } from "./broker-properties.js";
import { type CreateTopicOptions, createKafkaTopic, waitUntilKafkaServes } from "./kafka-admin.js";
import type { KafkaService } from "./kafka-service.js";

/**
 * Options of {@link startContainerKafka}.
 *
 * @example
 * ```ts
 * const options: ContainerKafkaOptions = { version: "4.1.1", startTimeoutMs: 180_000 };
 * ```
 */
export interface ContainerKafkaOptions {
  version: string;
  /** Default `apache/kafka:<version>` (the Apache project's own image, one tag per release). */
  image?: string;
  startTimeoutMs: number;
}

/**
 * Turns broker settings into the apache/kafka image's environment (`a.b.c` → `KAFKA_A_B_C`).
 *
 * @example
 * ```ts
 * toKafkaImageEnvironment({ "num.partitions": "1" }); // { KAFKA_NUM_PARTITIONS: "1" }
 * ```
 */
export function toKafkaImageEnvironment(settings: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(settings).map(([key, value]) => [
      `KAFKA_${key.toUpperCase().replaceAll(".", "_")}`,
      value,
    ]),
  );
}

/**
 * Starts a KRaft broker in a container (testcontainers, apache/kafka image). The host port equals the
 * container port, picked free at runtime, so the advertised address is right from the start and stays
 * the same when the container is killed and started again.
 *
 * @example
 * ```ts
 * const kafka = await startContainerKafka({ version: "3.9.1", startTimeoutMs: 180_000 });
 * ```
 */
export async function startContainerKafka(options: ContainerKafkaOptions): Promise<KafkaService> {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await loadTestcontainers();
  const host = (await getContainerRuntimeClient()).info.containerRuntime.host;
  const port = await findFreePort();
  const brokers = [`${host}:${port}`];
  const image = options.image ?? `apache/kafka:${options.version}`;
  const started = await new GenericContainer(image)
    .withExposedPorts({ container: port, host: port })
    .withEnvironment({
      CLUSTER_ID: "b25jZWZsb3ctdGVzdGtpdA",
      KAFKA_HEAP_OPTS: "-Xms128m -Xmx512m",
      KAFKA_NODE_ID: "1",
      KAFKA_PROCESS_ROLES: "broker,controller",
      KAFKA_CONTROLLER_QUORUM_VOTERS: "1@localhost:29093",
      KAFKA_LISTENERS: `PLAINTEXT://0.0.0.0:${port},CONTROLLER://localhost:29093`,
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${port}`,
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
      KAFKA_CONTROLLER_LISTENER_NAMES: "CONTROLLER",
      KAFKA_INTER_BROKER_LISTENER_NAME: "PLAINTEXT",
      KAFKA_LOG_DIRS: "/var/lib/kafka/data",
      ...toKafkaImageEnvironment(testBrokerSettings(options.version)),
    })
    .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
    .withStartupTimeout(options.startTimeoutMs)
    .start();
  const control = await controlContainer(started);

  const waitServing = async (): Promise<void> => {
    const problem = await waitUntilKafkaServes(brokers, options.startTimeoutMs);
    if (problem !== undefined) {
      throw serviceUnavailable(
        `Kafka container ${image} at ${brokers[0]} did not serve: ${problem}\n--- container log tail ---\n` +
          (await control.logTail()),
        { image, brokers },
      );
    }
  };
  try {
    await waitServing();
  } catch (error) {
    await control.remove();
    throw error;
  }
  let running = true;
  let stopped = false;
  return {
    brokers,
    version: options.version,
    provider: "testcontainers",
    pid: undefined,
    workDir: undefined,
    sasl: undefined,
    createTopic: (name: string, topic: CreateTopicOptions) => createKafkaTopic(brokers, name, topic),
    async kill() {
      if (!running) return;
      await control.kill("SIGKILL");
      running = false;
    },
    async start() {
      if (stopped)
        throw serviceUnavailable("Kafka start(): this broker was stopped and its container removed");
      if (running) return;
      await control.start();
      running = true;
      await waitServing();
    },
    async stop() {
      await started.stop({ timeout: 20_000 }).catch(() => {});
      await control.remove();
      running = false;
      stopped = true;
    },
  };
}
