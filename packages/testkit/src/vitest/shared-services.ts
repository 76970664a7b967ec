import { afterAll, beforeAll, inject } from "vitest";
import { serviceUnavailable } from "../errors/service-errors.js";
import { type CreateTopicOptions, createKafkaTopic } from "../services/kafka/kafka-admin.js";
import type { KafkaService, StartKafkaOptions } from "../services/kafka/kafka-service.js";
import { startKafka } from "../services/kafka/start-kafka.js";
import type { PostgresService, StartPostgresOptions } from "../services/postgres/postgres-service.js";
import { startPostgres } from "../services/postgres/start-postgres.js";
import { PROVIDED_KEYS, type SharedKafkaInfo, type SharedPostgresInfo } from "./provided-context.js";

/**
 * The run's shared broker as a test sees it: addresses and `createTopic`, but no kill/stop (it is
 * shared; a destructive test starts its own with {@link usePrivateKafka}).
 *
 * @example
 * ```ts
 * const kafka: SharedKafka = sharedKafka();
 * await kafka.createTopic(`t-${randomUUID()}`, { partitions: 1 });
 * ```
 */
export interface SharedKafka extends SharedKafkaInfo {
  createTopic(name: string, options: CreateTopicOptions): Promise<void>;
}

const NOT_PROVIDED =
  "was not provided to this test run: add the testkit's global setup to the vitest config " +
  '(test.globalSetup: ["@onceflow/testkit/global-setup"])';

/**
 * The Kafka broker the global setup started for this run. Throws (never skips) when the run has none.
 *
 * @example
 * ```ts
 * const kafka = sharedKafka();
 * await kafka.createTopic(`orders-${randomUUID()}`, { partitions: 3 });
 * new Kafka({ brokers: kafka.brokers });
 * ```
 */
export function sharedKafka(): SharedKafka {
  const info = inject(PROVIDED_KEYS.kafka);
  if (info === undefined || info === null) {
    throw serviceUnavailable(
      `The shared Kafka broker ${NOT_PROVIDED}, or ONCEFLOW_TESTKIT_SERVICES left Kafka out`,
    );
  }
  return { ...info, createTopic: (name, options) => createKafkaTopic(info.brokers, name, options) };
}

/**
 * The PostgreSQL the global setup started for this run. Throws (never skips) when the run has none.
 *
 * @example
 * ```ts
 * const client = new pg.Client({ connectionString: sharedPostgres().connectionString });
 * ```
 */
export function sharedPostgres(): SharedPostgresInfo {
  const info = inject(PROVIDED_KEYS.postgres);
  if (info === undefined || info === null) {
    throw serviceUnavailable(
      `The shared PostgreSQL ${NOT_PROVIDED}, or ONCEFLOW_TESTKIT_SERVICES left PostgreSQL out`,
    );
  }
  return info;
}

/**
 * Starts a private broker for the tests of the current file or `describe` block (in `beforeAll`) and
 * stops it afterwards (in `afterAll`). For fault injection (`kill`/`start`) and for a second Kafka
 * version next to the shared one. Returns a getter, valid inside tests.
 *
 * @example
 * ```ts
 * const kafka4 = usePrivateKafka({ version: "4" });
 * it("works on Kafka 4", async () => {
 *   await kafka4().kill();
 *   await kafka4().start();
 * });
 * ```
 */
export function usePrivateKafka(options: StartKafkaOptions = {}): () => KafkaService {
  let service: KafkaService | undefined;
  beforeAll(async () => {
    service = await startKafka({ faultInjection: true, ...options });
  });
  afterAll(async () => {
    await service?.stop();
  });
  return () => {
    if (service === undefined) throw new Error("usePrivateKafka(): the broker is only there inside tests");
    return service;
  };
}

/**
 * Starts a private PostgreSQL for the tests of the current file or `describe` block and stops it
 * afterwards. For crash tests (`restart({ immediate: true })`) and servers with other settings.
 *
 * @example
 * ```ts
 * const noTwoPhase = usePrivatePostgres({ maxPreparedTransactions: 0 });
 * it("falls back to staging", async () => {
 *   const url = noTwoPhase().connectionString;
 * });
 * ```
 */
export function usePrivatePostgres(options: StartPostgresOptions = {}): () => PostgresService {
  let service: PostgresService | undefined;
  beforeAll(async () => {
    service = await startPostgres({ faultInjection: true, ...options });
  });
  afterAll(async () => {
    await service?.stop();
  });
  return () => {
    if (service === undefined) throw new Error("usePrivatePostgres(): the server is only there inside tests");
    return service;
  };
}
