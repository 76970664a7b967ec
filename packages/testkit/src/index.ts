// The sink and source contract suites without vitest (the describe* functions are in `@onceflow/testkit/vitest`).

// Defined in core (its own storage tests use it); re-exported so connector authors find it here.
export { createTestCheckpoint } from "@onceflow/core";
export type { SinkContractCase } from "./contract/contract-cases.js";
export { twoPhaseCommitSinkContractCases } from "./contract/contract-cases.js";
export type { SinkContractScope, TwoPhaseCommitSinkContract } from "./contract/contract-options.js";
export { DEFAULT_MAX_TRANSACTION_HANDLE_BYTES } from "./contract/contract-options.js";
export { ContractViolationError } from "./contract/contract-run.js";
export type {
  FailedSinkStep,
  FaultKind,
  FaultRule,
  InjectedFaults,
  SinkStep,
} from "./contract/fault-injection.js";
export {
  describeFailedStep,
  failedStepOf,
  InjectedFaultError,
  injectFaults,
  isSimulatedKill,
  SimulatedKillError,
} from "./contract/fault-injection.js";
export type { SourceContractCase } from "./contract/source-contract-cases.js";
export { sourceContractCases } from "./contract/source-contract-cases.js";
export type { SourceContract, SourceContractScope } from "./contract/source-contract-options.js";
// Faults of checkpoint storage and time, for tests of jobs, sinks and storages.
export type {
  FaultyCheckpointStorageOptions,
  HeldStore,
  StoreAttempt,
  StoreLatency,
  StoreOutcome,
  StoreRecord,
} from "./faults/faulty-checkpoint-storage.js";
export { FaultyCheckpointStorage, faultyCheckpointStorage } from "./faults/faulty-checkpoint-storage.js";
export type { SteppableClock } from "./faults/steppable-clock.js";
export { steppableClock } from "./faults/steppable-clock.js";
export type { ServiceWriter } from "./runtime/announce.js";
export { stderrWriter } from "./runtime/announce.js";
export { onceflowCacheDir } from "./runtime/cache-dir.js";
export { isProcessAlive } from "./runtime/processes.js";
export type { RedisServiceOptions } from "./services/generic/redis-service.js";
// A service for anything: Redis, MariaDB or your own system, through the same providers.
export { redisService, redisVersion } from "./services/generic/redis-service.js";
export type {
  LocalServiceContext,
  ServiceAddress,
  ServiceCommand,
  ServiceContainer,
  ServiceDefinition,
  StartedService,
  StartServiceOptions,
} from "./services/generic/service-definition.js";
export { serviceVariable } from "./services/generic/service-definition.js";
export { startService } from "./services/generic/start-service.js";
export type { CreateTopicOptions } from "./services/kafka/kafka-admin.js";
export { createKafkaTopic } from "./services/kafka/kafka-admin.js";
export type { KafkaJars, KafkaJarsOptions } from "./services/kafka/kafka-jars.js";
export { ensureKafkaJars } from "./services/kafka/kafka-jars.js";
export type { KafkaSaslListener, KafkaService, StartKafkaOptions } from "./services/kafka/kafka-service.js";
export { KAFKA_VERSIONS, resolveKafkaVersion } from "./services/kafka/kafka-versions.js";
export type { CommittedKafkaRecord } from "./services/kafka/read-committed.js";
export { readCommittedKafkaRecords } from "./services/kafka/read-committed.js";
export { startKafka } from "./services/kafka/start-kafka.js";
export type { PostgresService, StartPostgresOptions } from "./services/postgres/postgres-service.js";
export { startPostgres } from "./services/postgres/start-postgres.js";
export type {
  ProbeResult,
  ProviderDecision,
  ProviderKind,
  ProviderPreference,
} from "./services/providers/provider-selection.js";
export { decideProvider, providerOrder } from "./services/providers/provider-selection.js";
