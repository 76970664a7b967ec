// The sink contract suite: what packages/testkit/src/index.ts re-exports.
export type { SinkContractCase } from "./contract-cases.js";
export { twoPhaseCommitSinkContractCases } from "./contract-cases.js";
export type { SinkContractScope, TwoPhaseCommitSinkContract } from "./contract-options.js";
export { ContractViolationError } from "./contract-run.js";
export { describeTwoPhaseCommitSink } from "./describe-two-phase-commit-sink.js";
export type { FaultKind, FaultRule, InjectedFaults, SinkStep } from "./fault-injection.js";
export { InjectedFaultError, injectFaults, isSimulatedKill, SimulatedKillError } from "./fault-injection.js";
