import {
  type FunctionInitializationContext,
  type FunctionSnapshotContext,
  isCheckpointedFunction,
  isCheckpointListener,
  type RuntimeContext,
} from "../../api/checkpointed-function.js";
import { DefaultOperatorStateStore, type OperatorStateSnapshot } from "../../state/operator-state-store.js";
import type { OperatorEnvironment } from "./stream-operator.js";

/**
 * The checkpoint side of a user function (a sink or a process function): operator state through
 * `CheckpointedFunction`, notifications through `CheckpointListener`. Both are optional.
 */
export class UserFunctionState {
  private store: DefaultOperatorStateStore | undefined;
  readonly runtimeContext: RuntimeContext;

  constructor(
    private readonly userFunction: unknown,
    environment: OperatorEnvironment,
    operatorUid: string,
  ) {
    this.runtimeContext = {
      jobId: environment.jobId,
      operatorUid,
      subtaskIndex: environment.subtaskIndex,
      parallelism: environment.parallelism,
      attemptNumber: environment.attemptNumber,
      incarnation: environment.incarnation,
      ...(environment.incarnationSeries === undefined
        ? {}
        : { incarnationSeries: environment.incarnationSeries }),
      checkpointingInterval: environment.checkpointingInterval,
      logger: environment.logger.child({ operator: operatorUid, subtask: environment.subtaskIndex }),
      metrics: environment.metrics,
    };
    this.restoredCheckpointId = environment.restoredCheckpointId;
  }

  private readonly restoredCheckpointId: number | undefined;

  async initialize(restored: OperatorStateSnapshot | undefined): Promise<void> {
    if (!isCheckpointedFunction(this.userFunction)) return;
    const store = new DefaultOperatorStateStore(restored);
    this.store = store;
    const isRestored = this.restoredCheckpointId !== undefined;
    const restoredCheckpointId = this.restoredCheckpointId;
    const context: FunctionInitializationContext = {
      ...this.runtimeContext,
      isRestored: () => isRestored,
      getRestoredCheckpointId: () => restoredCheckpointId,
      getOperatorStateStore: () => store,
    };
    await this.userFunction.initializeState(context);
  }

  async snapshot(checkpoint: FunctionSnapshotContext): Promise<OperatorStateSnapshot | undefined> {
    if (!isCheckpointedFunction(this.userFunction) || !this.store) return undefined;
    await this.userFunction.snapshotState(checkpoint);
    return this.store.snapshot();
  }

  async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    if (isCheckpointListener(this.userFunction))
      await this.userFunction.notifyCheckpointComplete(checkpointId);
  }

  async notifyCheckpointAborted(checkpointId: number): Promise<void> {
    if (isCheckpointListener(this.userFunction))
      await this.userFunction.notifyCheckpointAborted?.(checkpointId);
  }
}
