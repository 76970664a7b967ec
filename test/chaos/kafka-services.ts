// Where the shared services are, for the Kafka chaos tests and the Kafka examples' tests: the root
// vitest globalSetup (testkit) exports ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL to the workers.
// A missing service fails, never skips.

function required(name: string, hint: string): string {
  const value = process.env[name];
  if (value === undefined || value.trim() === "") throw new Error(`${name} is not set: ${hint}`);
  return value.trim();
}

/** The shared broker's bootstrap addresses. */
export function sharedKafkaBrokers(): string[] {
  return required(
    "ONCEFLOW_KAFKA_BROKERS",
    "run through the root vitest config (its global setup starts Kafka) or point it at a broker",
  )
    .split(",")
    .map((broker) => broker.trim());
}

/** The shared PostgreSQL (with prepared transactions). */
export function sharedPostgresUrl(): string {
  return required(
    "ONCEFLOW_POSTGRES_URL",
    "run through the root vitest config (its global setup starts PostgreSQL) or point it at one with max_prepared_transactions > 0",
  );
}
