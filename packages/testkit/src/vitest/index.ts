// The `@onceflow/testkit/vitest` entry point: helpers for tests running under vitest.

export { createTestCheckpoint } from "@onceflow/core";
// Contract suites: a whole vitest suite for your own sink, source or checkpoint storage.
export type {
  CheckpointAddress,
  CheckpointStorageContractOptions,
} from "../contract/checkpoint-storage-contract.js";
export { describeCheckpointStorageContract } from "../contract/checkpoint-storage-contract.js";
export type { SinkContractCase } from "../contract/contract-cases.js";
export { twoPhaseCommitSinkContractCases } from "../contract/contract-cases.js";
export type { SinkContractScope, TwoPhaseCommitSinkContract } from "../contract/contract-options.js";
export { DEFAULT_MAX_TRANSACTION_HANDLE_BYTES } from "../contract/contract-options.js";
export { ContractViolationError } from "../contract/contract-run.js";
export { describeSource } from "../contract/describe-source.js";
export { describeTwoPhaseCommitSink } from "../contract/describe-two-phase-commit-sink.js";
export type {
  FailedSinkStep,
  FaultKind,
  FaultRule,
  InjectedFaults,
  SinkStep,
} from "../contract/fault-injection.js";
export {
  describeFailedStep,
  failedStepOf,
  InjectedFaultError,
  injectFaults,
  isSimulatedKill,
  SimulatedKillError,
} from "../contract/fault-injection.js";
export type { SourceContractCase } from "../contract/source-contract-cases.js";
export { sourceContractCases } from "../contract/source-contract-cases.js";
export type { SourceContract, SourceContractScope } from "../contract/source-contract-options.js";
export type { SharedKafkaInfo, SharedPostgresInfo } from "./provided-context.js";
export { PROVIDED_KEYS } from "./provided-context.js";
export type { SharedKafka } from "./shared-services.js";
export { sharedKafka, sharedPostgres, usePrivateKafka, usePrivatePostgres } from "./shared-services.js";
export { useService } from "./use-service.js";
