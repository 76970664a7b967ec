// The public API of @onceflow/core. Everything a user or connector author needs is exported here;
// nothing else in this package is public.

// Functions and their checkpoint callbacks
export type {
  CheckpointedFunction,
  CheckpointListener,
  FunctionInitializationContext,
  FunctionSnapshotContext,
  IncarnationSeriesContext,
  RuntimeContext,
} from "./api/checkpointed-function.js";
export { isCheckpointedFunction, isCheckpointListener } from "./api/checkpointed-function.js";
export type {
  Collector,
  KeyedProcessContext,
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
  TimerService,
} from "./api/process-function.js";
export {
  assertCheckpointName,
  checksumOf,
  parseCheckpointMetadata,
  serializeCheckpointMetadata,
  subtaskEntriesOf,
  verifySubtaskStates,
} from "./checkpoint/checkpoint-files.js";
export type {
  CheckpointHistoryEntry,
  CompletedCheckpointEntry,
  FailedCheckpointEntry,
  RestoredCheckpointEntry,
} from "./checkpoint/checkpoint-history-entries.js";
export {
  assertHistorySize,
  compareHistoryEntries,
  DEFAULT_CHECKPOINT_HISTORY_SIZE,
  parseHistoryEntry,
  validateHistoryEntry,
} from "./checkpoint/checkpoint-history-entries.js";
export type { CheckpointPhases } from "./checkpoint/checkpoint-phases.js";
// Checkpoints
export type {
  CheckpointMetadata,
  CheckpointStorage,
  ClaimIncarnationOptions,
  CompletedCheckpoint,
  IncarnationSeries,
  SubtaskStateEntry,
} from "./checkpoint/checkpoint-storage.js";
export type { CheckpointingOptions } from "./checkpoint/checkpointing-options.js";
export type { CompletedCheckpointOptions } from "./checkpoint/completed-checkpoint.js";
export { createCompletedCheckpoint } from "./checkpoint/completed-checkpoint.js";
export {
  type CheckpointFileReport,
  type CleanupOptions,
  checkpointDirectoryName,
  FileSystemCheckpointStorage,
  type FileSystemCheckpointStorageOptions,
  filesystem,
  type SubtaskFileCheck,
  subtaskStateFileName,
} from "./checkpoint/filesystem-checkpoint-storage.js";
export { fencingScopeOf, supersededError } from "./checkpoint/incarnation.js";
export { MemoryCheckpointStorage } from "./checkpoint/memory-checkpoint-storage.js";
export type { RetentionOptions } from "./checkpoint/retention.js";
export { retainLatestCheckpoints } from "./checkpoint/retention.js";
export { createTestCheckpoint } from "./checkpoint/testing/test-checkpoints.js";
// Dashboard
export type { Dashboard, DashboardOptions } from "./dashboard/serve-dashboard.js";
export { serveDashboard } from "./dashboard/serve-dashboard.js";
// Errors, logging, metrics
export { formatError } from "./errors/format-error.js";
export type {
  ErrorDetails,
  NonRestoredOperatorState,
  OperatorStateKind,
} from "./errors/onceflow-error.js";
export {
  asOnceflowError,
  CheckpointError,
  ConfigurationError,
  DeserializationError,
  ErrorCode,
  isOnceflowError,
  NonRestoredStateError,
  ONCEFLOW_ERROR_BRAND,
  OnceflowError,
  RecoveryError,
  TransactionError,
} from "./errors/onceflow-error.js";
export { defaultLogFormat, defaultLogger, setDefaultLogger } from "./observability/default-logger.js";
export type { LogEntry, LogFormat, LogFunction, Logger, LogLevel } from "./observability/logger.js";
export {
  createConsoleLogger,
  createMemoryLogger,
  isLogLevel,
  logSafeFields,
  silentLogger,
} from "./observability/logger.js";
export type {
  Counter,
  Gauge,
  Histogram,
  MemoryMetrics,
  MetricLabels,
  Metrics,
} from "./observability/metrics.js";
export { createMemoryMetrics, MetricNames, noopMetrics } from "./observability/metrics.js";
export { teeMetrics } from "./observability/tee-metrics.js";
export type { KeyedProcessFunctionFactory, OperatorOptions } from "./runtime/data-stream.js";
export { DataStream, KeyedStream, WindowedStream } from "./runtime/data-stream.js";
export type {
  CrossProcessExchange,
  ExchangeChannel,
  ExchangeChannelSpec,
  ExchangeControlRecord,
  ExchangeDataRecord,
  ExchangeRecord,
} from "./runtime/exchange/cross-process-exchange.js";
export type { KeyByOptions, RecordSerializer } from "./runtime/exchange/record-serializer.js";
// Jobs
export type { JobOptions, JobResult, SourceOptions } from "./runtime/job.js";
export { Job } from "./runtime/job.js";
export type { HealthVerdict } from "./runtime/job-health.js";
export {
  checkLiveness,
  checkReadiness,
  DEFAULT_MAX_STEP_MS,
  defaultMaxCheckpointAge,
} from "./runtime/job-health.js";
export type { JobLaunchOptions } from "./runtime/job-launch-options.js";
export type { JobState, JobStatus, SubtaskStatus } from "./runtime/job-status.js";
export type { RestartStrategy } from "./runtime/restart-strategy.js";
export type { RestoreSetting } from "./runtime/restore/restore-plan.js";
export type { SubtaskLiveness } from "./runtime/subtask.js";
export type { CollectTransaction } from "./sink/collect-sink.js";
export { CollectedOutput, CollectSink } from "./sink/collect-sink.js";
export { DiscardingSink } from "./sink/discarding-sink.js";
export type { FileSinkOptions, FileTransaction } from "./sink/file-sink.js";
export { FileSink, readCommittedFiles } from "./sink/file-sink.js";
// Sinks
export type { Sink, SinkContext, SinkFactory } from "./sink/sink.js";
export type { HarnessTransaction } from "./sink/testing/harness-transactions.js";
export { readHarnessTransactions } from "./sink/testing/harness-transactions.js";
export type { HarnessCheckpoint } from "./sink/testing/sink-test-harness.js";
export { SinkTestHarness } from "./sink/testing/sink-test-harness.js";
export type {
  CommitErrorClassification,
  CommitRetryOptions,
  PendingTransaction,
  TwoPhaseCommitSinkOptions,
} from "./sink/two-phase-commit-options.js";
export { TwoPhaseCommitSink } from "./sink/two-phase-commit-sink.js";
export type { FileLinesInput, FileLinesSourceOptions, FileLinesSplit } from "./source/file-lines-source.js";
export { FileLinesReader, FileLinesSource } from "./source/file-lines-source.js";
export type { GeneratorSourceOptions, GeneratorSplit } from "./source/generator-source.js";
export { GeneratorSource, GeneratorSourceReader } from "./source/generator-source.js";
// Sources
export type {
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SourceSplit,
  SplitEnumeratorContext,
} from "./source/source.js";
export {
  assignToKeyGroup,
  DEFAULT_MAX_PARALLELISM,
  keyGroupRangeForOperatorIndex,
  keyHashCode,
  operatorIndexForKeyGroup,
} from "./state/key-groups.js";
export type { StateKey } from "./state/keyed-state-backend.js";
export type { OperatorStateDistributionMode, OperatorStateSnapshot } from "./state/operator-state-store.js";
export { DefaultOperatorStateStore, redistributeOperatorState } from "./state/operator-state-store.js";
// State
export type { TypeSerializer } from "./state/serializer.js";
export { defaultSerializer, defaultSerializerFor, jsonSerializer } from "./state/serializer.js";
export type {
  KeyedStateStore,
  ListState,
  MapState,
  OperatorStateStore,
  StateDescriptor,
  ValueState,
} from "./state/state.js";
// Subtasks in worker threads
export type { AggregatedMetrics } from "./threads/aggregate-metrics.js";
export { combineStatuses } from "./threads/combine-statuses.js";
export type {
  SubtaskThreadResult,
  SubtaskThreads,
  SubtaskThreadsOptions,
  SubtaskThreadsResult,
} from "./threads/run-subtasks-in-threads.js";
export { runSubtasksInThreads } from "./threads/run-subtasks-in-threads.js";
export type { TimestampAssigner } from "./time/watermark-strategy.js";
export { WatermarkStrategy, WatermarkStrategyBuilder } from "./time/watermark-strategy.js";
// Windows
export type { AggregateFunction, ReduceFunction, WindowResultFunction } from "./window/aggregate-function.js";
export { countAggregate } from "./window/aggregate-function.js";
export { TimeWindow } from "./window/time-window.js";
export type { WindowAssigner } from "./window/window-assigners.js";
export {
  SlidingEventTimeWindows,
  SlidingProcessingTimeWindows,
  TumblingEventTimeWindows,
  TumblingProcessingTimeWindows,
} from "./window/window-assigners.js";
export type { WindowOptions } from "./window/window-function.js";
export { createWindowAggregateFunction, createWindowReduceFunction } from "./window/window-function.js";
