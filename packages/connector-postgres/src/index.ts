export type { PostgresCheckpointStorageOptions } from "./checkpoint/postgres-checkpoint-storage.js";
export { PostgresCheckpointStorage } from "./checkpoint/postgres-checkpoint-storage.js";
export { PostgresConfigurationError, PostgresErrorReason } from "./errors/postgres-errors.js";
export type {
  PostgresSinkCommonOptions,
  PostgresSinkCustomWriteOptions,
  PostgresSinkMode,
  PostgresSinkOperation,
  PostgresSinkOptions,
  PostgresSinkTableOptions,
} from "./sink/options.js";
export type { PostgresTransaction } from "./sink/postgres-sink.js";
export { defaultSinkId, PostgresSink } from "./sink/postgres-sink.js";
export type { PostgresConnectionOptions } from "./sql/pool.js";
