// The `@onceflow/testkit/vitest` entry point: helpers for tests running under vitest.
export type { SharedKafkaInfo, SharedPostgresInfo } from "./provided-context.js";
export { PROVIDED_KEYS } from "./provided-context.js";
export type { SharedKafka } from "./shared-services.js";
export { sharedKafka, sharedPostgres, usePrivateKafka, usePrivatePostgres } from "./shared-services.js";
