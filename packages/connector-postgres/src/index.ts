export { PostgresCheckpointStorage } from "./checkpoint/postgres-checkpoint-storage.js";
export type { PostgresCheckpointStorageOptions } from "./checkpoint/postgres-checkpoint-storage.js";
export { PostgresConfigurationError, PostgresErrorReason } from "./errors/postgres-errors.js";
export type { PostgresConnectionOptions } from "./sql/pool.js";
export type {
  PostgresSinkCommonOptions,
  PostgresSinkCustomWriteOptions,
  PostgresSinkMode,
  PostgresSinkOperation,
  PostgresSinkOptions,
  PostgresSinkTableOptions,
} from "./sink/options.js";
export { defaultSinkId, PostgresSink } from "./sink/postgres-sink.js";
export type { PostgresTransaction } from "./sink/postgres-sink.js";
