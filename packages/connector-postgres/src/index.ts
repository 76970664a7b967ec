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
export { PostgresChangeDecodingError, PostgresReplicationConnectionError } from "./changes/changes-errors.js";
export type {
  PostgresChangesSplit,
  ResumedSegment,
  SnapshotTableProgress,
  TransactionSnapshot,
} from "./changes/changes-split.js";
export type { ColumnValue } from "./changes/column-values.js";
export type { PostgresChange, PostgresChangeKind, PostgresRow } from "./changes/postgres-change.js";
export type { PostgresChangesSourceOptions } from "./changes/postgres-changes-source.js";
export { PostgresChangesSource, RETAINED_WAL_METRIC } from "./changes/postgres-changes-source.js";
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
