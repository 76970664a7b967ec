export type {
  CheckpointedFunction,
  CheckpointListener,
  FunctionInitializationContext,
  FunctionSnapshotContext,
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
export type {
  CheckpointMetadata,
  CheckpointStorage,
  CompletedCheckpoint,
  SubtaskStateEntry,
} from "./checkpoint/checkpoint-storage.js";
export type { CheckpointingOptions } from "./checkpoint/checkpointing-options.js";
export type { ErrorDetails } from "./errors/onceflow-error.js";
export {
  asOnceflowError,
  CheckpointError,
  ConfigurationError,
  DeserializationError,
  ErrorCode,
  OnceflowError,
  RecoveryError,
  TransactionError,
} from "./errors/onceflow-error.js";
export type { LogEntry, LogFunction, Logger } from "./observability/logger.js";
export { createConsoleLogger, createMemoryLogger, silentLogger } from "./observability/logger.js";
export type {
  Counter,
  Gauge,
  Histogram,
  MemoryMetrics,
  MetricLabels,
  Metrics,
} from "./observability/metrics.js";
export { createMemoryMetrics, MetricNames, noopMetrics } from "./observability/metrics.js";
export type { RestartStrategy } from "./runtime/restart-strategy.js";
export type { Sink, SinkContext, SinkFactory } from "./sink/sink.js";
export type {
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SourceSplit,
  SplitEnumeratorContext,
} from "./source/source.js";
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
