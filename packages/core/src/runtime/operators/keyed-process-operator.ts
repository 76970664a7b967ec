import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import type {
  Collector,
  KeyedProcessFunction,
  KeyedRuntimeContext,
  OnTimerContext,
  TimerService,
} from "../../api/process-function.js";
import { ConfigurationError } from "../../errors/onceflow-error.js";
import { assignToKeyGroup } from "../../state/key-groups.js";
import { KEY_SCOPED, KeyedStateBackend, type StateKey } from "../../state/keyed-state-backend.js";
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
 * How a keyed operator scopes its state and timers: per key group (`keyBy`: records arrive through
 * the exchange at the subtask that owns their key group), or per split (`reinterpretAsKeyedStream`:
 * the input is already partitioned by the key, each key in one split). Recorded in every
 * checkpoint: a restore into the other mode is refused.
 */
export type KeyedPartitioning =
  | { readonly kind: "key-group"; readonly maxParallelism: number }
  | { readonly kind: "split" };

/**
 * Runs a {@link KeyedProcessFunction} after `keyBy`: sets the current scope (key group or split)
 * and key for state access, collects output per batch, and fires event-time timers on watermarks
 * and processing-time timers from the subtask loop.
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

  /** The scope of a key in a checkpoint: its key group ("0", "1", …) after `keyBy`. */
  private readonly scopeOfKey: ((key: StateKey) => string) | undefined;

  constructor(
    uid: string,
    private readonly keySelector: (value: unknown) => unknown,
    private readonly userFunction: KeyedProcessFunction<StateKey, unknown, unknown>,
    private readonly partitioning: KeyedPartitioning = { kind: "split" },
  ) {
    super(uid);
    if (partitioning.kind === "key-group") {
      const { maxParallelism } = partitioning;
      const names = Array.from({ length: maxParallelism }, (_, keyGroup) => String(keyGroup));
      this.scopeOfKey = (key) => names[assignToKeyGroup(key, maxParallelism)]!;
    }
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
    checkRestoredPartitioning(this.uid, this.partitioning, restored, environment.restoredCheckpointId);
    this.backend = new KeyedStateBackend(restored?.keyed, this.scopeOfKey);
    const byKey = this.scopeOfKey !== undefined;
    restoreTimers(this.eventTimers, restored?.eventTimers, byKey);
    restoreTimers(this.processingTimers, restored?.processingTimers, byKey);
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
    // After keyBy, state is one table per state between snapshots (key groups are worked out then).
    backend.setCurrentScope(this.scopeOfKey ? KEY_SCOPED : batch.splitKey);
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
    const partitioning = this.partitioning;
    return {
      ...(operatorState ? { operatorState } : {}),
      ...(partitioning.kind === "key-group"
        ? { keyedBy: "key-group" as const, maxParallelism: partitioning.maxParallelism }
        : { keyedBy: "split" as const }),
      keyed: this.backend.snapshot(),
      eventTimers: snapshotTimers(this.eventTimers, this.scopeOfKey),
      processingTimers: snapshotTimers(this.processingTimers, this.scopeOfKey),
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
    const scope = this.backend.currentScope;
    let queue = queues.get(scope);
    if (!queue) {
      queue = new TimerQueue();
      queues.set(scope, queue);
    }
    return queue;
  }

  private async fireTimers(queues: Map<string, TimerQueue>, time: number, domain: TimeDomain): Promise<void> {
    const onTimer = this.userFunction.onTimer;
    if (!onTimer) return;
    this.currentDomain = domain;
    for (const [scope, queue] of queues) {
      this.backend.setCurrentScope(scope);
      for (let timer = queue.pollDue(time); timer; timer = queue.pollDue(time)) {
        this.backend.setCurrentKey(timer.key);
        this.currentTimestamp = domain === "event-time" ? timer.time : undefined;
        const pending = onTimer.call(this.userFunction, timer.time, this.context, this.collector);
        if (pending) await pending;
      }
      await this.flush(scope);
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

/** The key of a record, refused unless it is a primitive that compares by value. */
export function checkKey(key: unknown, uid: string): StateKey {
  const type = typeof key;
  if (type === "string" || type === "number" || type === "bigint" || type === "boolean")
    return key as StateKey;
  throw new ConfigurationError(
    `keyBy of '${uid}'`,
    `the key selector returned a ${key === null ? "null" : type}; return a string, number, bigint or boolean (for a composite key, join its parts into a string)`,
  );
}

/**
 * Refuses restored keyed state that this operator would misread: state scoped per split (written
 * by `reinterpretAsKeyedStream`, or before key groups existed) into a `keyBy` operator, state per
 * key group into a reinterpreted one, or key groups of another `maxParallelism`.
 */
function checkRestoredPartitioning(
  uid: string,
  partitioning: KeyedPartitioning,
  restored: OperatorSnapshot | undefined,
  checkpointId: number | undefined,
): void {
  if (restored === undefined) return;
  const holdsKeyedState =
    Object.keys(restored.keyed ?? {}).length > 0 ||
    Object.keys(restored.eventTimers ?? {}).length > 0 ||
    Object.keys(restored.processingTimers ?? {}).length > 0;
  const written = restored.keyedBy ?? (holdsKeyedState ? "per-split-before-key-groups" : undefined);
  if (written === undefined) return;
  const checkpoint = checkpointId === undefined ? "the restored checkpoint" : `checkpoint ${checkpointId}`;
  const setting = `keyed state of '${uid}'`;
  if (partitioning.kind === "key-group") {
    if (written === "per-split-before-key-groups") {
      throw new ConfigurationError(
        setting,
        `${checkpoint} holds it per source split, as written before keyed state was kept per key group; it cannot be read as key groups. If every key's records come from one split (a Kafka topic partitioned by the key), read it with reinterpretAsKeyedStream(keySelector) instead of keyBy, which keeps state per split; otherwise start the job without this state (restore: "none", or a new jobId)`,
      );
    }
    if (written === "split") {
      throw new ConfigurationError(
        setting,
        `${checkpoint} holds it per source split (the operator ran after reinterpretAsKeyedStream), but it now runs after keyBy, which keeps state per key group; use reinterpretAsKeyedStream again, or start the job without this state (restore: "none", or a new jobId)`,
      );
    }
    if (restored.maxParallelism !== partitioning.maxParallelism) {
      throw new ConfigurationError(
        "maxParallelism",
        `is ${partitioning.maxParallelism}, but ${checkpoint} keeps the ${setting} in ${restored.maxParallelism} key groups; maxParallelism is fixed for the life of a job: set it back to ${restored.maxParallelism}`,
      );
    }
    return;
  }
  if (written === "key-group") {
    throw new ConfigurationError(
      setting,
      `${checkpoint} holds it per key group (the operator ran after keyBy), but it now runs after reinterpretAsKeyedStream, which keeps state per split; use keyBy again, or start the job without this state (restore: "none", or a new jobId)`,
    );
  }
}

/** Restored timers: one queue per split, or after `keyBy` every key group's in one queue. */
function restoreTimers(
  queues: Map<string, TimerQueue>,
  restored: Record<string, Timer[]> | undefined,
  byKey: boolean,
): void {
  const entries = Object.entries(restored ?? {});
  if (byKey) {
    if (entries.length > 0) queues.set(KEY_SCOPED, new TimerQueue(entries.flatMap(([, timers]) => timers)));
    return;
  }
  for (const [scope, timers] of entries) queues.set(scope, new TimerQueue(timers));
}

/** Timers for a checkpoint: per split, or after `keyBy` per key group of each timer's key. */
function snapshotTimers(
  queues: Map<string, TimerQueue>,
  scopeOfKey: ((key: StateKey) => string) | undefined,
): Record<string, Timer[]> {
  const result: Record<string, Timer[]> = {};
  for (const [scope, queue] of queues) {
    if (queue.size === 0) continue;
    if (!scopeOfKey) {
      result[scope] = queue.toArray();
      continue;
    }
    for (const timer of queue.toArray()) {
      const keyGroup = scopeOfKey(timer.key);
      const timers = result[keyGroup] ?? [];
      timers.push(timer);
      result[keyGroup] = timers;
    }
  }
  return result;
}
