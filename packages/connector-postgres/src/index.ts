export type { PostgresControlTablesOptions, PostgresSinkIdInfo } from "./admin/registered-sink-ids.js";
export { listPostgresSinkIds } from "./admin/registered-sink-ids.js";
export type {
  PostgresPreparedTransactionInfo,
  PostgresSinkRollbackResult,
  PostgresSinkTransactions,
  PostgresSinkTransactionsOptions,
  PostgresStagingTableInfo,
  RollbackPostgresSinkTransactionsOptions,
} from "./admin/sink-transactions.js";
export { listPostgresSinkTransactions, rollbackPostgresSinkTransactions } from "./admin/sink-transactions.js";
export type { PostgresCheckpointStorageOptions } from "./checkpoint/postgres-checkpoint-storage.js";
export { PostgresCheckpointStorage } from "./checkpoint/postgres-checkpoint-storage.js";
export type { RejectedRowDetails } from "./errors/postgres-errors.js";
export {
  PostgresConfigurationError,
  PostgresErrorReason,
  PostgresRecordRejectedError,
} from "./errors/postgres-errors.js";
export type {
  PostgresSinkCommonOptions,
  PostgresSinkCustomWriteOptions,
  PostgresSinkMode,
  PostgresSinkOperation,
  PostgresSinkOptions,
  PostgresSinkTableOptions,
} from "./sink/options.js";
export { defaultSinkId } from "./sink/options-check.js";
export type { PostgresTransaction } from "./sink/postgres-sink.js";
export { PostgresSink } from "./sink/postgres-sink.js";
export { preparedGid } from "./sink/prepared-mode.js";
export type { PostgresConnectionOptions } from "./sql/pool.js";
