import {
  type HarnessCheckpoint,
  OnceflowError,
  readHarnessTransactions,
  SinkTestHarness,
  type TwoPhaseCommitSink,
} from "@onceflow/core";
import {
  DEFAULT_MAX_TRANSACTION_HANDLE_BYTES,
  type SinkContractScope,
  type TwoPhaseCommitSinkContract,
} from "./contract-options.js";
import {
  describeFailedStep,
  type FaultRule,
  failedStepOf,
  type InjectedFaults,
  injectFaults,
  isSimulatedKill,
} from "./fault-injection.js";

/**
 * A contract case found the sink breaking the two-phase-commit contract: the message says what was
 * committed wrongly (missing, duplicated, unexpected records) and at which step.
 *
 * @example
 * ```ts
 * try { await testCase.run(); } catch (error) { if (error instanceof ContractViolationError) console.log(error.details); }
 * ```
 */
export class ContractViolationError extends OnceflowError {
  constructor(message: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super("USER_FUNCTION_FAILED", message, { details, cause });
  }
}

interface StoredCheckpoint {
  readonly checkpoint: HarnessCheckpoint;
  /** How many input records the source had emitted at the barrier: where a restore replays from. */
  readonly position: number;
}

/**
 * One subtask of a job as the suite models it: a bounded source of `createRecord(0..total-1)` whose
 * position is checkpointed, the sink driven by a {@link SinkTestHarness}, and a checkpoint store.
 * Like the runtime, checkpoint ids continue after the highest stored id, so an id whose checkpoint
 * was never stored is used again after a restore.
 */
export class ContractSubtask<
  IN,
  S extends TwoPhaseCommitSink<IN, unknown> = TwoPhaseCommitSink<IN, unknown>,
> {
  readonly stored = new Map<number, StoredCheckpoint>();
  private harness: SinkTestHarness<IN> | undefined;
  private incarnation = 0;
  private sink: S | undefined;
  private faultControl: InjectedFaults | undefined;
  private position = 0;
  private lastTriggered = 0;
  /** Position at each snapshot taken by the current instance, by checkpoint id. */
  private readonly snapshots = new Map<number, { checkpoint: HarnessCheckpoint; position: number }>();

  constructor(
    private readonly contract: TwoPhaseCommitSinkContract<IN, S>,
    readonly scope: SinkContractScope,
    /** The global indexes of the records this subtask emits, in order. */
    readonly input: readonly number[],
    /** Incarnations of this subtask's instances start after this one (a zombie's are lower than the live process's). */
    incarnationsAfter = 0,
  ) {
    this.incarnation = incarnationsAfter;
  }

  /** The number of records emitted so far. */
  get emitted(): number {
    return this.position;
  }

  /** The injected-fault control of the current instance. */
  get faults(): InjectedFaults {
    if (this.faultControl === undefined) throw new Error("no sink instance is running");
    return this.faultControl;
  }

  /** Starts a new instance: fresh, or restored from a stored checkpoint (`"latest"`: the highest stored). */
  async start(options: { restore?: number | "latest"; faults?: readonly FaultRule[] } = {}): Promise<void> {
    if (this.harness !== undefined)
      throw new Error("start(): the previous instance was neither killed nor closed");
    const restoreId =
      options.restore === "latest"
        ? Math.max(0, ...this.stored.keys()) || undefined
        : (options.restore ?? undefined);
    const restored = restoreId === undefined ? undefined : this.stored.get(restoreId);
    if (restoreId !== undefined && restored === undefined)
      throw new Error(`checkpoint ${restoreId} was never stored`);
    const sink = await this.contract.createSink(this.scope);
    this.faultControl = injectFaults(sink, options.faults ?? []);
    // Every start is a new attempt with a higher incarnation, as the runtime gives it.
    this.incarnation++;
    const harness = new SinkTestHarness(sink, {
      subtaskIndex: this.scope.subtaskIndex,
      parallelism: this.scope.parallelism,
      jobId: `contract-${this.scope.id}`,
      attemptNumber: this.incarnation - 1,
      incarnation: this.incarnation,
    });
    this.sink = sink;
    this.harness = harness;
    this.position = restored?.position ?? 0;
    this.lastTriggered = Math.max(0, ...this.stored.keys());
    this.snapshots.clear();
    await harness.initialize(restored?.checkpoint);
  }

  /** Emits the next `count` records (or all that are left) into the sink as one batch. */
  async write(count: number): Promise<void> {
    const harness = this.requireHarness();
    const indexes = this.input.slice(this.position, this.position + count);
    if (indexes.length === 0) return;
    const records = indexes.map((index) => this.contract.createRecord(index));
    await harness.write(...records);
    this.position += indexes.length;
  }

  /** A checkpoint barrier: `snapshotState` with the next checkpoint id. Returns the id. */
  async snapshot(): Promise<number> {
    const harness = this.requireHarness();
    const checkpointId = ++this.lastTriggered;
    const position = this.position;
    const checkpoint = await harness.snapshot(checkpointId);
    this.checkHandleSizes(checkpoint);
    this.snapshots.set(checkpointId, { checkpoint, position });
    return checkpointId;
  }

  /** The checkpoint is durable (every subtask acknowledged and its metadata was written). */
  store(checkpointId: number): void {
    const snapshot = this.snapshots.get(checkpointId);
    if (snapshot === undefined)
      throw new Error(`checkpoint ${checkpointId} was not snapshotted by this instance`);
    this.stored.set(checkpointId, snapshot);
  }

  async notifyComplete(checkpointId: number): Promise<void> {
    await this.requireHarness().notifyComplete(checkpointId);
    // With backgroundCommits the notification returns before the commit ends: the cases check the
    // output after the commit, and its failure surfaces here as an inline one would.
    await this.sink?.awaitBackgroundCommit();
  }

  async notifyAborted(checkpointId: number): Promise<void> {
    await this.requireHarness().notifyAborted(checkpointId);
  }

  /** A whole checkpoint: snapshot, store, notify complete. Returns its id. */
  async checkpoint(): Promise<number> {
    const checkpointId = await this.snapshot();
    this.store(checkpointId);
    await this.notifyComplete(checkpointId);
    return checkpointId;
  }

  /**
   * The process dies here (SIGKILL): the instance is abandoned — no `close`, no abort, nothing of it
   * runs again; the contract's `kill` releases its sockets or handles the way the OS would.
   */
  async kill(): Promise<void> {
    const sink = this.sink;
    // From here on every author step of the dead instance throws, even if something calls it.
    this.faultControl?.kill();
    this.harness = undefined;
    this.sink = undefined;
    if (sink !== undefined) await this.contract.kill?.(sink, this.scope);
  }

  /** The attempt failed (an error, not a kill): the runtime closes the sink, which aborts its open transaction. */
  async fail(): Promise<void> {
    const harness = this.harness;
    this.harness = undefined;
    this.sink = undefined;
    await harness?.close();
  }

  /** Runs `step`, expecting it to fail with a simulated kill, then kills the instance. */
  async expectKilledBy(what: string, step: () => Promise<unknown>): Promise<void> {
    const error = await step().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    if (!isSimulatedKill(error)) {
      throw new ContractViolationError(
        `${this.contract.name}: expected the simulated kill at ${what}, but the step ${error === undefined ? "succeeded (the sink never reached that step)" : `failed otherwise: ${describeFailure(error)}`}`,
        { caseId: this.scope.caseId },
        error,
      );
    }
    await this.kill();
  }

  /** Runs `step`, expecting it to fail (an injected fault), then fails the attempt (close). */
  async expectFailureOf(what: string, step: () => Promise<unknown>): Promise<void> {
    const error = await step().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    if (error === undefined) {
      throw new ContractViolationError(
        `${this.contract.name}: expected ${what} to fail with the injected fault, but it succeeded (the sink never called that step)`,
        { caseId: this.scope.caseId },
      );
    }
    await this.fail();
  }

  /** Emits the rest of the input, one checkpoint every `perCheckpoint` records, then `finish`, the final checkpoint and `close`. */
  async finish(perCheckpoint: number): Promise<void> {
    while (this.position < this.input.length) {
      await this.write(perCheckpoint);
      await this.checkpoint();
    }
    const harness = this.requireHarness();
    const finalId = ++this.lastTriggered;
    const position = this.position;
    // finishAndClose, step by step: the handles are checked while the sink can still describe them.
    await this.sink?.finish();
    const checkpoint = await harness.snapshot(finalId);
    this.checkHandleSizes(checkpoint);
    await harness.notifyComplete(finalId);
    await harness.close();
    this.snapshots.set(finalId, { checkpoint, position });
    this.stored.set(finalId, { checkpoint, position });
    this.harness = undefined;
    this.sink = undefined;
  }

  /** The global record indexes emitted before the given stored checkpoint's barrier. */
  inputBefore(checkpointId: number): readonly number[] {
    const stored = this.stored.get(checkpointId);
    if (stored === undefined) throw new Error(`checkpoint ${checkpointId} was never stored`);
    return this.input.slice(0, stored.position);
  }

  /** Fails when a transaction handle in the checkpoint is over `maxTransactionHandleBytes`. */
  private checkHandleSizes(checkpoint: HarnessCheckpoint): void {
    const limit = this.contract.maxTransactionHandleBytes ?? DEFAULT_MAX_TRANSACTION_HANDLE_BYTES;
    const oversized = readHarnessTransactions(checkpoint).filter((each) => each.handleBytes > limit);
    const first = oversized[0];
    if (first === undefined) return;
    const sink = this.sink;
    const handle =
      first.kind === "pending"
        ? sink?.pendingTransactions().find((each) => each.checkpointId === first.checkpointId)?.transaction
        : sink?.currentTransaction();
    const described = handle === undefined ? "" : ` ${describeTransactionOf(sink, handle)}`;
    const what =
      first.kind === "pending"
        ? `the transaction${described} pre-committed for checkpoint ${first.checkpointId}`
        : `the open transaction${described} (begun after checkpoint ${first.checkpointId})`;
    throw new ContractViolationError(
      `${this.contract.name}: ${this.scope.caseId}: ${what} is stored as ${first.handleBytes} bytes in checkpoint ${checkpoint.checkpointId}, over maxTransactionHandleBytes (${limit}): a transaction handle must carry ids and positions, not the records — stage the records in the external system (or raise maxTransactionHandleBytes if the handle really needs the room)`,
      {
        caseId: this.scope.caseId,
        checkpointId: checkpoint.checkpointId,
        handleBytes: oversized.map((each) => each.handleBytes),
        maxTransactionHandleBytes: limit,
      },
    );
  }

  private requireHarness(): SinkTestHarness<IN> {
    if (this.harness === undefined) throw new Error("no sink instance is running: start() it first");
    return this.harness;
  }
}

/**
 * Compares what the destination shows with the expected input records, as multisets. Throws a
 * {@link ContractViolationError} naming missing, duplicated and unexpected records.
 */
export async function expectCommitted<IN, S extends TwoPhaseCommitSink<IN, unknown>>(
  contract: TwoPhaseCommitSinkContract<IN, S>,
  scopes: readonly SinkContractScope[],
  expected: {
    exactlyOnce: readonly number[];
    atLeastOnce?: readonly number[];
    atMostTwice?: readonly number[];
  },
  when: string,
): Promise<void> {
  const identify = contract.identify ?? ((value: IN) => JSON.stringify(value));
  const seen = new Map<string, number>();
  const firstScope = scopes[0];
  if (firstScope === undefined) throw new Error("expectCommitted: no scope");
  for (const value of await contract.readCommitted(firstScope)) {
    const key = identify(value);
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  const missing: string[] = [];
  const duplicated: string[] = [];
  const wanted = new Map<string, { min: number; max: number }>();
  for (const index of expected.exactlyOnce)
    wanted.set(identify(contract.createRecord(index)), { min: 1, max: 1 });
  for (const index of expected.atLeastOnce ?? []) {
    wanted.set(identify(contract.createRecord(index)), { min: 1, max: Number.POSITIVE_INFINITY });
  }
  for (const index of expected.atMostTwice ?? [])
    wanted.set(identify(contract.createRecord(index)), { min: 1, max: 2 });
  for (const [key, { min, max }] of wanted) {
    const count = seen.get(key) ?? 0;
    if (count < min) missing.push(key);
    else if (count > max) duplicated.push(`${key} ×${count}`);
  }
  const unexpected = [...seen.keys()].filter((key) => !wanted.has(key));
  if (missing.length + duplicated.length + unexpected.length === 0) return;
  const list = (items: string[]) =>
    items.length > 8 ? `${items.slice(0, 8).join(", ")} … (${items.length})` : items.join(", ");
  const problems = [
    missing.length > 0 ? `missing ${list(missing)}` : undefined,
    duplicated.length > 0 ? `duplicated ${list(duplicated)}` : undefined,
    unexpected.length > 0
      ? `unexpected (never committed by a completed checkpoint) ${list(unexpected)}`
      : undefined,
  ].filter((problem) => problem !== undefined);
  throw new ContractViolationError(
    `${contract.name}: ${when}: the committed output is wrong: ${problems.join("; ")}`,
    {
      missing,
      duplicated,
      unexpected,
    },
  );
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The error, with the author step and transaction it came from when known. */
export function describeFailure(error: unknown): string {
  const failed = failedStepOf(error);
  return failed === undefined
    ? describeError(error)
    : `${describeFailedStep(failed)} threw ${describeError(error)}`;
}

/** The sink's own `describeTransaction` (protected: the suite reads it as the logs do). */
function describeTransactionOf(sink: object | undefined, transaction: unknown): string {
  const describe = (sink as { describeTransaction?: (txn: unknown) => string } | undefined)
    ?.describeTransaction;
  try {
    return describe === undefined ? String(transaction) : describe.call(sink, transaction);
  } catch {
    return String(transaction);
  }
}
