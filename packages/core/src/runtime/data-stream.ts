import type { KeyedProcessFunction } from "../api/process-function.js";
import type { Sink, SinkFactory } from "../sink/sink.js";
import type { StateKey } from "../state/keyed-state-backend.js";
import type {
  AggregateFunction,
  ReduceFunction,
  WindowResultFunction,
} from "../window/aggregate-function.js";
import type { WindowAssigner } from "../window/window-assigners.js";
import {
  createWindowAggregateFunction,
  createWindowReduceFunction,
  type WindowOptions,
} from "../window/window-function.js";
import type { KeyByOptions, RecordSerializer } from "./exchange/record-serializer.js";
import { type KeyedPartitioning, KeyedProcessOperator } from "./operators/keyed-process-operator.js";
import { SinkOperator } from "./operators/sink-operator.js";
import {
  FilterOperator,
  FlatMapOperator,
  MapOperator,
  UnionOperator,
} from "./operators/transform-operators.js";
import { instantiatePerSubtask, type StreamGraph, type StreamNode } from "./stream-graph.js";

/**
 * Options every transformation takes. Give a `uid` to every stateful operator (process, windows,
 * sinks, sources): state is matched to operators by uid on restore, so a uid must stay the same
 * as the job evolves — as in Flink.
 *
 * @example
 * ```ts
 * stream.sinkTo(sink, { uid: "orders-sink" });
 * ```
 */
export interface OperatorOptions {
  readonly uid?: string;
}

/** A per-subtask factory of a keyed process function. */
export type KeyedProcessFunctionFactory<K, IN, OUT> = (context: {
  subtaskIndex: number;
  parallelism: number;
}) => KeyedProcessFunction<K, IN, OUT>;

/**
 * A stream of records of type `T` — Flink's `DataStream`. Transformations return new streams;
 * nothing runs until `job.execute()`.
 *
 * @example
 * ```ts
 * job.fromSource(source, { uid: "clicks" })
 *   .filter((click) => click.valid)
 *   .map((click) => ({ user: click.user, at: click.at }))
 *   .sinkTo(sink, { uid: "out" });
 * ```
 */
export class DataStream<T> {
  /** @internal */
  constructor(
    /** @internal */
    protected readonly graph: StreamGraph,
    /** @internal */
    readonly node: StreamNode,
  ) {}

  /** One output per record. Synchronous; for I/O per record use a sink. */
  map<OUT>(mapper: (value: T) => OUT, options: OperatorOptions = {}): DataStream<OUT> {
    return this.append("map", options, (uid) => new MapOperator(uid, mapper as (value: unknown) => unknown));
  }

  /** Keeps the records for which `predicate` returns true. */
  filter(predicate: (value: T) => boolean, options: OperatorOptions = {}): DataStream<T> {
    return this.append(
      "filter",
      options,
      (uid) => new FilterOperator(uid, predicate as (value: unknown) => boolean),
    );
  }

  /** Zero or more outputs per record (return an array or any iterable). */
  flatMap<OUT>(expand: (value: T) => Iterable<OUT>, options: OperatorOptions = {}): DataStream<OUT> {
    return this.append(
      "flatMap",
      options,
      (uid) => new FlatMapOperator(uid, expand as (value: unknown) => Iterable<unknown>),
    );
  }

  /**
   * Partitions the stream by key for keyed state, timers and windows — Flink's `keyBy`: one state
   * per key for the whole job, whatever split or subtask a record came from. Each key falls into
   * one of the job's `maxParallelism` key groups (see `assignToKeyGroup`), and every record goes
   * through the exchange to the subtask that owns its key group. Keys are strings, numbers,
   * bigints or booleans (join the parts of a composite key into a string). Where the exchange
   * crosses threads or processes, `options.serializer` makes the crossing cheaper than the default
   * structured clone (see {@link RecordSerializer}).
   *
   * @example
   * ```ts
   * clicks.keyBy((click) => click.user).process(new CountPerUser(), { uid: "counts" });
   * ```
   */
  keyBy<K extends StateKey>(keySelector: (value: T) => K, options: KeyByOptions<T> = {}): KeyedStream<K, T> {
    return new KeyedStream(this.graph, this.node, keySelector, "key-group", options.serializer);
  }

  /**
   * Treats the stream as already partitioned by key, with no exchange — Flink's
   * `DataStreamUtils.reinterpretAsKeyedStream`. Keyed state and timers are kept per key within the
   * split a record came from, and move with the split on rescale. Correct only when every key's
   * records come from one split for the life of the job (a Kafka topic whose producers partition by
   * this key, with a partition count that never changes): a key read from two splits gets two
   * independent states, and its aggregates are wrong. The checkpoint records the mode; restoring
   * state written by `keyBy` into it (or the reverse) is refused.
   *
   * @example
   * ```ts
   * job.fromSource(ordersByCustomer, { uid: "orders" })
   *   .reinterpretAsKeyedStream((order) => order.customer)
   *   .process(new RunningTotal(), { uid: "totals" });
   * ```
   */
  reinterpretAsKeyedStream<K extends StateKey>(keySelector: (value: T) => K): KeyedStream<K, T> {
    return new KeyedStream(this.graph, this.node, keySelector, "split");
  }

  /** Merges streams of the same type; the watermark is the minimum of the inputs'. */
  union(...others: DataStream<T>[]): DataStream<T> {
    const node = this.graph.add(
      "union",
      [this.node, ...others.map((other) => other.node)],
      undefined,
      (uid) => new UnionOperator(uid),
    );
    return new DataStream<T>(this.graph, node);
  }

  /**
   * Writes the stream to a sink. Pass a factory when the process runs several subtasks, so each
   * has its own instance.
   */
  sinkTo(sink: Sink<T> | SinkFactory<T>, options: OperatorOptions = {}): void {
    this.graph.add("sink", [this.node], options.uid, (uid, context) => {
      const instance = instantiatePerSubtask(
        sink as Sink<unknown> | SinkFactory<unknown>,
        `sinkTo '${uid}'`,
        context,
      );
      return new SinkOperator(uid, instance);
    });
  }

  /** @internal */
  protected append<OUT>(
    kind: StreamNode["kind"],
    options: OperatorOptions,
    create: Parameters<StreamGraph["add"]>[3],
  ): DataStream<OUT> {
    return new DataStream<OUT>(this.graph, this.graph.add(kind, [this.node], options.uid, create));
  }
}

/**
 * A stream partitioned by key — Flink's `KeyedStream`.
 *
 * @example
 * ```ts
 * stream.keyBy((order) => order.customer).process(new RunningTotal(), { uid: "totals" });
 * ```
 */
export class KeyedStream<K extends StateKey, T> {
  /** @internal */
  constructor(
    private readonly graph: StreamGraph,
    private readonly input: StreamNode,
    private readonly keySelector: (value: T) => K,
    private readonly partitioning: KeyedPartitioning["kind"],
    private readonly serializer?: RecordSerializer<T>,
  ) {}

  /** Processes each record with keyed state and timers. */
  process<OUT>(
    processFunction: KeyedProcessFunction<K, T, OUT> | KeyedProcessFunctionFactory<K, T, OUT>,
    options: OperatorOptions = {},
  ): DataStream<OUT> {
    const keySelector = this.keySelector as (value: unknown) => unknown;
    const node = this.graph.add(
      "process",
      [this.input],
      options.uid,
      (uid, context) => {
        const instance = instantiatePerSubtask(processFunction, `process '${uid}'`, context);
        return new KeyedProcessOperator(
          uid,
          keySelector,
          instance as unknown as KeyedProcessFunction<StateKey, unknown, unknown>,
          this.partitioning === "key-group"
            ? { kind: "key-group", maxParallelism: context.maxParallelism }
            : { kind: "split" },
        );
      },
      undefined,
      this.partitioning === "key-group"
        ? {
            keySelector,
            ...(this.serializer === undefined
              ? {}
              : { serializer: this.serializer as RecordSerializer<unknown> }),
          }
        : undefined,
    );
    return new DataStream<OUT>(this.graph, node);
  }

  /** Groups each key's records into windows (tumbling or sliding, event or processing time). */
  window(assigner: WindowAssigner, options: WindowOptions<T> = {}): WindowedStream<K, T> {
    return new WindowedStream(this, assigner, options);
  }
}

/**
 * A keyed stream divided into windows — Flink's `WindowedStream`. Each window's result is emitted
 * when the watermark (or processing time) passes its end, with the window's last millisecond as
 * its timestamp.
 *
 * @example
 * ```ts
 * keyed.window(TumblingEventTimeWindows.of(10_000))
 *   .aggregate(countAggregate(), (key, window, count) => ({ key, start: window.start, count }), { uid: "counts" });
 * ```
 */
export class WindowedStream<K extends StateKey, T> {
  /** @internal */
  constructor(
    private readonly keyed: KeyedStream<K, T>,
    private readonly assigner: WindowAssigner,
    private readonly options: WindowOptions<T>,
  ) {}

  /** Combines each window's records pairwise; optionally maps (key, window, result) to the output. */
  reduce<OUT = T>(
    reduce: ReduceFunction<T>,
    windowFunction?: WindowResultFunction<K, T, OUT>,
    options: OperatorOptions = {},
  ): DataStream<OUT> {
    return this.keyed.process(
      () =>
        createWindowReduceFunction<K, T, OUT>(
          this.assigner,
          reduce,
          windowFunction as WindowResultFunction<K, T, OUT>,
          this.options,
        ),
      options,
    );
  }

  /** Folds each window's records into an accumulator; optionally maps (key, window, result). */
  aggregate<ACC, R, OUT = R>(
    aggregate: AggregateFunction<T, ACC, R>,
    windowFunction?: WindowResultFunction<K, R, OUT>,
    options: OperatorOptions = {},
  ): DataStream<OUT> {
    return this.keyed.process(
      () =>
        createWindowAggregateFunction<K, T, ACC, R, OUT>(
          this.assigner,
          aggregate,
          windowFunction as WindowResultFunction<K, R, OUT>,
          this.options,
        ),
      options,
    );
  }
}
