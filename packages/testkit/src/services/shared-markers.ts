/**
 * Variables the global setup sets next to `ONCEFLOW_KAFKA_BROKERS` / `ONCEFLOW_POSTGRES_URL` when it
 * exports the run's shared services to them. When the variable equals its marker, it names the
 * testkit's own shared service, not one the user provided, and the environment provider ignores it
 * (so `startKafka()` in a test still starts a private broker).
 *
 * @example
 * ```ts
 * const ours = env.ONCEFLOW_KAFKA_BROKERS === env[SHARED_MARKERS.kafka];
 * ```
 */
export const SHARED_MARKERS = {
  kafka: "ONCEFLOW_TESTKIT_SHARED_KAFKA_BROKERS",
  postgres: "ONCEFLOW_TESTKIT_SHARED_POSTGRES_URL",
} as const;

/**
 * The value of `variable` unless the testkit's global setup put it there (see {@link SHARED_MARKERS}).
 *
 * @example
 * ```ts
 * userProvided(process.env, "ONCEFLOW_KAFKA_BROKERS", SHARED_MARKERS.kafka);
 * ```
 */
export function userProvided(env: NodeJS.ProcessEnv, variable: string, marker: string): string | undefined {
  const value = env[variable]?.trim();
  if (!value) return undefined;
  return value === env[marker]?.trim() ? undefined : value;
}
