import type { ProviderKind } from "../services/providers/provider-selection.js";

/**
 * The shared broker of a test run, as the global setup hands it to the tests (plain data: it crosses
 * process boundaries).
 *
 * @example
 * ```ts
 * const { brokers } = inject("onceflowKafka");
 * ```
 */
export interface SharedKafkaInfo {
  brokers: string[];
  version: string;
  provider: ProviderKind;
}

/**
 * The shared PostgreSQL of a test run, as the global setup hands it to the tests.
 *
 * @example
 * ```ts
 * const { connectionString } = inject("onceflowPostgres");
 * ```
 */
export interface SharedPostgresInfo {
  connectionString: string;
  host: string;
  port: number;
  user: string;
  database: string;
  version: string;
  provider: ProviderKind;
  maxPreparedTransactions: number;
}

/**
 * The keys under which the global setup provides the shared services.
 *
 * @example
 * ```ts
 * inject(PROVIDED_KEYS.kafka);
 * ```
 */
export const PROVIDED_KEYS = { kafka: "onceflowKafka", postgres: "onceflowPostgres" } as const;

declare module "vitest" {
  export interface ProvidedContext {
    /** The run's shared Kafka broker (from `@onceflow/testkit/global-setup`); `null` when not started. */
    onceflowKafka: SharedKafkaInfo | null;
    /** The run's shared PostgreSQL (from `@onceflow/testkit/global-setup`); `null` when not started. */
    onceflowPostgres: SharedPostgresInfo | null;
  }
}
