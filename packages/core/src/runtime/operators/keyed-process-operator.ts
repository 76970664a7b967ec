import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import type {
  Collector,
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
  TimerService,
} from "../../api/process-function.js";
import { ConfigurationError } from "../../errors/onceflow-error.js";
import { KeyedStateBackend, type StateKey } from "../../state/keyed-state-backend.js";
import { type Timer, TimerQueue } from "../timer-queue.js";
import {
  type OperatorEnvironment,
  type OperatorSnapshot,
  type RecordBatch,
  StreamOperator,
} from "./stream-operator.js";
import { UserFunctionState } from "./user-function-state.js";

type TimeDomain = "event-time" | "processing-time";

/**
 * Runs a {@link KeyedProcessFunction} after `keyBy`: sets the current split and key for state
 * access, collects output per batch, and fires event-time timers on watermarks and
 * processing-time timers from the subtask loop.
 */
export class KeyedProcessOperator extends StreamOperator {
  private backend = new KeyedStateBackend();
  private readonly eventTimers = new Map<string, TimerQueue>();
  private readonly processingTimers = new Map<string, TimerQueue>();
  private state: UserFunctionState | undefined;
  private outValues: unknown[] = [];
  private outTimestamps: Array<number | undefined> = [];
  private hasTimestamps = false;
  private currentTimestamp: number | undefined;
  private currentDomain: TimeDomain = "event-time";
  private readonly collector: Collector<unknown>;
  private readonly context: OnTimerContext<StateKey>;

  constructor(
    uid: string,
    private readonly keySelector: (value: unknown) => unknown,
    private readonly userFunction: KeyedProcessFunction<StateKey, unknown, unknown>,
  ) {
    super(uid);
    this.collector = {
      collect: (value, timestamp) => {
        const time = timestamp ?? this.currentTimestamp;
        this.outValues.push(value);
        this.outTimestamps.push(time);
        if (time !== undefined) this.hasTimestamps = true;
      },
    };
    const timerService: TimerService = {
      currentProcessingTime: () => Date.now(),
      currentWatermark: () => this.currentWatermark,
      registerEventTimeTimer: (time) => this.timersOf(this.eventTimers).add(time, this.backend.currentKey),
      registerProcessingTimeTimer: (time) =>
        this.timersOf(this.processingTimers).add(time, this.backend.currentKey),
      deleteEventTimeTimer: (time) => this.timersOf(this.eventTimers).delete(time, this.backend.currentKey),
      deleteProcessingTimeTimer: (time) =>
        this.timersOf(this.processingTimers).delete(time, this.backend.currentKey),
    };
    this.context = {
      timestamp: () => this.currentTimestamp,
      getCurrentKey: () => this.backend.currentKey,
      timerService: () => timerService,
      timeDomain: () => this.currentDomain,
    };
  }

  override async initialize(
    environment: OperatorEnvironment,
    restored: OperatorSnapshot | undefined,
  ): Promise<void> {
    this.backend = new KeyedStateBackend(restored?.keyed);
    restoreTimers(this.eventTimers, restored?.eventTimers);
    restoreTimers(this.processingTimers, restored?.processingTimers);
    this.state = new UserFunctionState(this.userFunction, environment, this.uid);
    await this.state.initialize(restored?.operatorState);
  }

  override async open(): Promise<void> {
    const keyedContext: KeyedRuntimeContext = Object.assign(Object.create(null), this.state!.runtimeContext, {
      getState: this.backend.getState.bind(this.backend),
      getListState: this.backend.getListState.bind(this.backend),
      getMapState: this.backend.getMapState.bind(this.backend),
    });
    await this.userFunction.open?.(keyedContext);
  }

  async processBatch(batch: RecordBatch): Promise<void> {
    const backend = this.backend;
    backend.setCurrentSplit(batch.splitKey);
    const values = batch.values;
    const timestamps = batch.timestamps;
    const userFunction = this.userFunction;
    for (let index = 0; index < values.length; index++) {
      const value = values[index];
      backend.setCurrentKey(checkKey(this.keySelector(value), this.uid));
      this.currentTimestamp = timestamps?.[index];
      const pending = userFunction.processElement(value, this.context, this.collector);
      if (pending) await pending;
    }
    await this.flush(batch.splitKey);
  }

  protected override async onWatermark(watermark: number): Promise<void> {
    await this.fireTimers(this.eventTimers, watermark, "event-time");
    await this.emitWatermark(watermark);
  }

  override nextProcessingTime(): number | undefined {
    let earliest: number | undefined;
    for (const queue of this.processingTimers.values()) {
      const time = queue.peekTime();
      if (time !== undefined && (earliest === undefined || time < earliest)) earliest = time;
    }
    return earliest;
  }

  override async fireProcessingTimers(now: number): Promise<void> {
    await this.fireTimers(this.processingTimers, now, "processing-time");
  }

  override async snapshot(checkpoint: FunctionSnapshotContext): Promise<OperatorSnapshot> {
    const operatorState = await this.state!.snapshot(checkpoint);
    return {
      ...(operatorState ? { operatorState } : {}),
      keyed: this.backend.snapshot(),
      eventTimers: snapshotTimers(this.eventTimers),
      processingTimers: snapshotTimers(this.processingTimers),
    };
  }

  override async notifyCheckpointComplete(checkpointId: number): Promise<void> {
    await this.state!.notifyCheckpointComplete(checkpointId);
  }

  override async notifyCheckpointAborted(checkpointId: number): Promise<void> {
    await this.state!.notifyCheckpointAborted(checkpointId);
  }

  override async close(): Promise<void> {
    await this.userFunction.close?.();
  }

  private timersOf(queues: Map<string, TimerQueue>): TimerQueue {
    const splitKey = this.backend.currentSplit;
    let queue = queues.get(splitKey);
    if (!queue) {
      queue = new TimerQueue();
      queues.set(splitKey, queue);
    }
    return queue;
  }

  private async fireTimers(queues: Map<string, TimerQueue>, time: number, domain: TimeDomain): Promise<void> {
    const onTimer = this.userFunction.onTimer;
    if (!onTimer) return;
    this.currentDomain = domain;
    for (const [splitKey, queue] of queues) {
      this.backend.setCurrentSplit(splitKey);
      for (let timer = queue.pollDue(time); timer; timer = queue.pollDue(time)) {
        this.backend.setCurrentKey(timer.key);
        this.currentTimestamp = domain === "event-time" ? timer.time : undefined;
        const pending = onTimer.call(this.userFunction, timer.time, this.context, this.collector);
        if (pending) await pending;
      }
      await this.flush(splitKey);
    }
  }

  private async flush(splitKey: string): Promise<void> {
    if (this.outValues.length === 0) return;
    const values = this.outValues;
    const timestamps = this.hasTimestamps ? this.outTimestamps : undefined;
    this.outValues = [];
    this.outTimestamps = [];
    this.hasTimestamps = false;
    await this.emit({ splitKey, values, timestamps });
  }
}

function checkKey(key: unknown, uid: string): StateKey {
  const type = typeof key;
  if (type === "string" || type === "number" || type === "bigint" || type === "boolean")
    return key as StateKey;
  throw new ConfigurationError(
    `keyBy of '${uid}'`,
    `the key selector returned a ${key === null ? "null" : type}; return a string, number, bigint or boolean (for a composite key, join its parts into a string)`,
  );
}

function restoreTimers(queues: Map<string, TimerQueue>, restored: Record<string, Timer[]> | undefined): void {
  for (const [splitKey, timers] of Object.entries(restored ?? {}))
    queues.set(splitKey, new TimerQueue(timers));
}

function snapshotTimers(queues: Map<string, TimerQueue>): Record<string, Timer[]> {
  const result: Record<string, Timer[]> = {};
  for (const [splitKey, queue] of queues) if (queue.size > 0) result[splitKey] = queue.toArray();
  return result;
}
