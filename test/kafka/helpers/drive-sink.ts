import type { KafkaSink, KafkaTransaction } from "@onceflow/connector-kafka";
import {
  createMemoryLogger,
  createMemoryMetrics,
  type FunctionInitializationContext,
  type ListState,
  type OperatorStateStore,
  type SinkContext,
} from "@onceflow/core";

/** A sink's operator state as a checkpoint would hold it. */
export type SinkState = Map<string, unknown[]>;

function listState<T>(store: SinkState, name: string): ListState<T> {
  if (!store.has(name)) store.set(name, []);
  const items = () => store.get(name) as T[];
  return {
    get: () => [...items()],
    add: (value) => {
      items().push(value);
    },
    addAll: (values) => {
      items().push(...values);
    },
    update: (values) => {
      store.set(name, [...values]);
    },
    clear: () => {
      store.set(name, []);
    },
  };
}

const sinkContext: SinkContext = {
  timestamp: undefined,
  currentWatermark: Number.NEGATIVE_INFINITY,
  splitId: "test-0",
};

/** Each start is a new attempt: it gets a new, higher incarnation unless the test names one. */
let lastIncarnation = 0;

/**
 * Drives a sink by hand the way the runtime does (initializeState, open, writeBatch, snapshotState,
 * notifyCheckpointComplete, close), keeping its state as a checkpoint would.
 */
export class SinkDriver<IN> {
  readonly logger = createMemoryLogger();
  readonly metrics = createMemoryMetrics();
  private state: SinkState = new Map();

  private constructor(readonly sink: KafkaSink<IN>) {}

  static async start<IN>(
    sink: KafkaSink<IN>,
    options: {
      restored?: { checkpointId: number; state: SinkState };
      subtaskIndex?: number;
      parallelism?: number;
      /** The incarnation the sink sees (default: one above every earlier start's, as the runtime does). */
      incarnation?: number;
      /** The job (default `test`). */
      jobId?: string;
      /** The checkpoint storage's incarnation series and newest incarnation, as the runtime passes them (absent by default). */
      incarnationSeries?: { readonly series: string; readonly newest: number };
    } = {},
  ): Promise<SinkDriver<IN>> {
    const driver = new SinkDriver(sink);
    if (options.incarnation !== undefined) lastIncarnation = Math.max(lastIncarnation, options.incarnation);
    if (options.restored !== undefined) driver.state = structuredClone(options.restored.state);
    const store: OperatorStateStore = {
      getListState: <T>(descriptor: { name: string }) => listState<T>(driver.state, descriptor.name),
      getUnionListState: <T>(descriptor: { name: string }) => listState<T>(driver.state, descriptor.name),
    };
    const context: FunctionInitializationContext = {
      jobId: options.jobId ?? "test",
      operatorUid: "kafka-out",
      subtaskIndex: options.subtaskIndex ?? 0,
      parallelism: options.parallelism ?? 1,
      attemptNumber: 0,
      incarnation: options.incarnation ?? ++lastIncarnation,
      ...(options.incarnationSeries === undefined
        ? {}
        : {
            incarnationSeries: {
              series: options.incarnationSeries.series,
              newestIncarnation: async () => options.incarnationSeries?.newest ?? 0,
            },
          }),
      checkpointingInterval: undefined,
      logger: driver.logger,
      metrics: driver.metrics,
      isRestored: () => options.restored !== undefined,
      getRestoredCheckpointId: () => options.restored?.checkpointId,
      getOperatorStateStore: () => store,
    };
    await sink.initializeState(context);
    sink.open(context);
    return driver;
  }

  async write(values: IN[]): Promise<void> {
    await this.sink.writeBatch(values, sinkContext);
  }

  /** Takes checkpoint `checkpointId` (the job's last with `isFinal`) and returns the state it stores. */
  async checkpoint(checkpointId: number, options: { isFinal?: boolean } = {}): Promise<SinkState> {
    await this.sink.snapshotState({ checkpointId, checkpointTimestamp: Date.now(), ...options });
    return structuredClone(this.state);
  }

  async complete(checkpointId: number): Promise<void> {
    await this.sink.notifyCheckpointComplete(checkpointId);
  }

  pending(): KafkaTransaction[] {
    return this.sink.pendingTransactions().map((p) => p.transaction);
  }

  async close(): Promise<void> {
    await this.sink.close();
  }
}
