import type { TestProject } from "vitest/node";
import { KAFKA_BROKERS_VARIABLE } from "../services/kafka/environment-kafka.js";
import type { KafkaService } from "../services/kafka/kafka-service.js";
import { startKafka } from "../services/kafka/start-kafka.js";
import { POSTGRES_URL_VARIABLE } from "../services/postgres/environment-postgres.js";
import type { PostgresService } from "../services/postgres/postgres-service.js";
import { startPostgres } from "../services/postgres/start-postgres.js";
import { SHARED_MARKERS } from "../services/shared-markers.js";
import { PROVIDED_KEYS } from "./provided-context.js";

let kafka: KafkaService | undefined;
let postgres: PostgresService | undefined;

/** Which shared services the run starts: `ONCEFLOW_TESTKIT_SERVICES` = all (default), kafka, postgres or none. */
function wanted(env: NodeJS.ProcessEnv): { kafka: boolean; postgres: boolean } {
  const value = (env.ONCEFLOW_TESTKIT_SERVICES ?? "all").toLowerCase();
  const parts = value.split(",").map((part) => part.trim());
  const all = parts.includes("all");
  return { kafka: all || parts.includes("kafka"), postgres: all || parts.includes("postgres") };
}

// Tests written against the environment variables (before the testkit existed) see the shared
// services through them too. The marker tells startKafka/startPostgres in the workers that the
// variable was set by us, not by the user, so a test asking for its own broker still gets one.
function exportToEnvironment(variable: string, marker: string, value: string): void {
  if (process.env[variable]) return;
  process.env[variable] = value;
  process.env[marker] = value;
}

/**
 * Vitest global setup: starts one Kafka broker and one PostgreSQL for the whole run (in parallel),
 * hands their addresses to the tests with `project.provide` (read them with `sharedKafka()` /
 * `sharedPostgres()` from `@onceflow/testkit/vitest`, or `inject("onceflowKafka")`), and stops them
 * in {@link teardown}. `ONCEFLOW_TESTKIT_SERVICES=kafka|postgres|none` starts fewer, for unit-only runs.
 * A service that cannot be had fails the run with the list of what was tried.
 *
 * @example
 * ```ts
 * // vitest.config.ts
 * export default defineConfig({ test: { globalSetup: ["@onceflow/testkit/global-setup"] } });
 * ```
 */
export async function setup(project: TestProject): Promise<void> {
  const want = wanted(process.env);
  const [kafkaResult, postgresResult] = await Promise.allSettled([
    want.kafka ? startKafka() : Promise.resolve(undefined),
    want.postgres ? startPostgres() : Promise.resolve(undefined),
  ]);
  kafka = kafkaResult.status === "fulfilled" ? kafkaResult.value : undefined;
  postgres = postgresResult.status === "fulfilled" ? postgresResult.value : undefined;
  const failures = [kafkaResult, postgresResult].filter((r) => r.status === "rejected");
  if (failures.length > 0) {
    await teardown();
    const reasons = failures.map((failure) => (failure as PromiseRejectedResult).reason as Error);
    if (reasons.length === 1) throw reasons[0];
    throw new AggregateError(reasons, reasons.map((reason) => reason.message).join("\n\n"));
  }
  project.provide(
    PROVIDED_KEYS.kafka,
    kafka === undefined
      ? null
      : { brokers: [...kafka.brokers], version: kafka.version, provider: kafka.provider },
  );
  project.provide(
    PROVIDED_KEYS.postgres,
    postgres === undefined
      ? null
      : {
          connectionString: postgres.connectionString,
          host: postgres.host,
          port: postgres.port,
          user: postgres.user,
          database: postgres.database,
          version: postgres.version,
          provider: postgres.provider,
          maxPreparedTransactions: postgres.maxPreparedTransactions,
        },
  );
  if (kafka !== undefined)
    exportToEnvironment(KAFKA_BROKERS_VARIABLE, SHARED_MARKERS.kafka, kafka.brokers.join(","));
  if (postgres !== undefined) {
    exportToEnvironment(POSTGRES_URL_VARIABLE, SHARED_MARKERS.postgres, postgres.connectionString);
  }
}

/**
 * Vitest global teardown: stops the shared services (nothing left running, temporary data deleted).
 *
 * @example
 * ```ts
 * export default defineConfig({ test: { globalSetup: ["@onceflow/testkit/global-setup"] } });
 * ```
 */
export async function teardown(): Promise<void> {
  const stopping = [kafka?.stop(), postgres?.stop()];
  kafka = undefined;
  postgres = undefined;
  const results = await Promise.allSettled(stopping);
  const failed = results.find((result) => result.status === "rejected");
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
}
