import {
  type CheckpointedFunction,
  type CheckpointListener,
  createMemoryLogger,
  createMemoryMetrics,
  type FunctionInitializationContext,
  type ListState,
  type LogEntry,
  type Logger,
  type OperatorStateStore,
  type Sink,
  type SinkContext,
  type StateDescriptor,
} from "@onceflow/core";

/** What a checkpoint of the driver holds: a copy of the operator state. */
export interface DriverCheckpoint {
  readonly checkpointId: number;
  readonly state: Map<string, unknown[]>;
}

class MemoryListState<T> implements ListState<T> {
  constructor(private readonly values: unknown[]) {}
  get(): T[] {
    return [...this.values] as T[];
  }
  add(value: T): void {
    this.values.push(value);
  }
  addAll(values: readonly T[]): void {
    this.values.push(...values);
  }
  update(values: readonly T[]): void {
    this.values.length = 0;
    this.values.push(...values);
  }
  clear(): void {
    this.values.length = 0;
  }
}

class MemoryStateStore implements OperatorStateStore {
  readonly lists = new Map<string, unknown[]>();
  constructor(restored?: Map<string, unknown[]>) {
    for (const [name, values] of restored ?? []) this.lists.set(name, structuredClone(values));
  }
  getListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
    let values = this.lists.get(descriptor.name);
    if (values === undefined) {
      values = [];
      this.lists.set(descriptor.name, values);
    }
    return new MemoryListState<T>(values);
  }
  getUnionListState<T>(descriptor: StateDescriptor<T>): ListState<T> {
    return this.getListState(descriptor);
  }
}

/**
 * Drives one sink by hand the way the runtime does for a subtask: initializeState (fresh or from a
 * checkpoint), open, writeBatch, snapshotState (+ a copy of the state), notifyCheckpointComplete,
 * close. Dropping a driver without `notifyCheckpointComplete` is a crash between the phases.
 */
export class SinkDriver<IN> {
  readonly logger: Logger & { readonly entries: LogEntry[] };
  private store = new MemoryStateStore();
  private readonly context: SinkContext = {
    timestamp: undefined,
    currentWatermark: -Infinity,
    splitId: "s0",
  };

  constructor(
    readonly sink: Sink<IN> & CheckpointedFunction & CheckpointListener,
    private readonly options: {
      jobId?: string;
      operatorUid?: string;
      subtaskIndex?: number;
      parallelism?: number;
      /** The runtime's attempt in this process (default 0) and the storage's incarnation (default 1). */
      attemptNumber?: number;
      incarnation?: number;
      /**
       * The checkpoint storage's incarnation series and its newest incarnation (default: the
       * driver's own), as the runtime passes them; absent unless set.
       */
      incarnationSeries?: { readonly series: string; readonly newest?: number };
    } = {},
  ) {
    this.logger = createMemoryLogger();
  }

  async start(restored?: DriverCheckpoint): Promise<void> {
    this.store = new MemoryStateStore(restored?.state);
    const store = this.store;
    const series = this.options.incarnationSeries;
    const context: FunctionInitializationContext = {
      jobId: this.options.jobId ?? "test-job",
      operatorUid: this.options.operatorUid ?? "out",
      subtaskIndex: this.options.subtaskIndex ?? 0,
      parallelism: this.options.parallelism ?? 1,
      attemptNumber: this.options.attemptNumber ?? 0,
      incarnation: this.options.incarnation ?? 1,
      ...(series === undefined
        ? {}
        : {
            incarnationSeries: {
              series: series.series,
              newestIncarnation: async () => series.newest ?? this.options.incarnation ?? 1,
            },
          }),
      checkpointingInterval: undefined,
      logger: this.logger,
      metrics: createMemoryMetrics(),
      isRestored: () => restored !== undefined,
      getRestoredCheckpointId: () => restored?.checkpointId,
      getOperatorStateStore: () => store,
    };
    await this.sink.initializeState(context);
    await this.sink.open?.(context);
  }

  async write(...values: IN[]): Promise<void> {
    if (this.sink.writeBatch) await this.sink.writeBatch(values, this.context);
    else for (const value of values) await this.sink.write(value, this.context);
  }

  async snapshot(checkpointId: number): Promise<DriverCheckpoint> {
    await this.sink.snapshotState({ checkpointId, checkpointTimestamp: Date.now() });
    return { checkpointId, state: structuredClone(this.store.lists) };
  }

  async complete(checkpointId: number): Promise<void> {
    await this.sink.notifyCheckpointComplete(checkpointId);
    // Staging mode commits in the background by default: the checkpoint's output is visible (or
    // its commit's failure thrown) once it ends.
    await (this.sink as { awaitBackgroundCommit?: () => Promise<void> }).awaitBackgroundCommit?.();
  }

  async finish(): Promise<void> {
    await this.sink.finish?.();
  }

  async close(): Promise<void> {
    await this.sink.close?.();
  }
}
