import type { Sink } from "../../sink/sink.js";
import type { Source, SourceSplit } from "../../source/source.js";
import type { RecordSerializer } from "./record-serializer.js";

/**
 * One record crossing an exchange between processes: a record of the stream (`data`) bound for
 * key group `keyGroup`, or a sender's progress (`control`) — its watermark, whether it is idle,
 * and whether its input has ended — written into every key group at each checkpoint. The runtime
 * makes and reads these; a {@link CrossProcessExchange} only carries them, in order per key group.
 *
 * @example
 * ```ts
 * const record: ExchangeRecord = { kind: "data", keyGroup: 17, value: { user: "a" }, timestamp: 1000 };
 * ```
 */
export type ExchangeRecord = ExchangeDataRecord | ExchangeControlRecord;

/**
 * A record of the stream on its way to the subtask that owns its key group.
 *
 * @example
 * ```ts
 * const data: ExchangeDataRecord = { kind: "data", keyGroup: 3, value: "a", timestamp: undefined };
 * ```
 */
export interface ExchangeDataRecord {
  readonly kind: "data";
  readonly keyGroup: number;
  readonly value: unknown;
  /** The record's event time, when it has one. */
  readonly timestamp: number | undefined;
}

/**
 * A sending subtask's progress, written into every key group at each checkpoint: the keyed side's
 * watermark is the minimum over senders, and its input ends when every sender has ended.
 *
 * @example
 * ```ts
 * const control: ExchangeControlRecord = {
 *   kind: "control", keyGroup: 3, sender: 1, senderParallelism: 2, watermark: 5000, idle: false, ended: false,
 * };
 * ```
 */
export interface ExchangeControlRecord {
  readonly kind: "control";
  readonly keyGroup: number;
  /** The sending subtask's index. */
  readonly sender: number;
  /** The job's parallelism when it was written (senders of another parallelism are another set). */
  readonly senderParallelism: number;
  /** The sender's watermark (`-Infinity` before its first). */
  readonly watermark: number;
  /** True when every input of the sender is idle (`withIdleness`): it does not hold event time back. */
  readonly idle: boolean;
  /** True once the sender's input has ended: nothing follows from it. */
  readonly ended: boolean;
}

/**
 * Where one `keyBy` exchange between processes is set up: the job, the keyed operator behind it,
 * and the key groups.
 *
 * @example
 * ```ts
 * const spec: ExchangeChannelSpec = { jobId: "clicks", keyedUid: "counts", maxParallelism: 128, parallelism: 2 };
 * ```
 */
export interface ExchangeChannelSpec {
  readonly jobId: string;
  /** The uid of the operator after `keyBy`: one channel per keyed operator. */
  readonly keyedUid: string;
  /** The job's number of key groups. */
  readonly maxParallelism: number;
  /** The job's parallelism (how many subtasks send, and receive). */
  readonly parallelism: number;
  /** The `keyBy`'s serializer, when it has one: the exchange writes records with it. */
  readonly serializer?: RecordSerializer<unknown>;
}

/**
 * The transport of one exchange: an exactly-once sink the sending side writes with (its
 * transactions committed when the checkpoint that pre-committed them completes), and a source the
 * keyed side reads with, seeing only committed records, in the order written per key group, with
 * its positions in the checkpoint. Every split of `source` carries exactly one key group
 * (`keyGroupOf`), so that a split's position moves with its key group's state on rescale.
 *
 * @example
 * ```ts
 * const channel: ExchangeChannel = {
 *   createSink: ({ subtaskIndex }) => new MyTransactionalSink(subtaskIndex),
 *   source: myKeyGroupSource,
 *   keyGroupOf: (split) => Number(split.splitId),
 * };
 * ```
 */
export interface ExchangeChannel {
  /** The sending side's sink, one per subtask. */
  createSink(context: { subtaskIndex: number; parallelism: number }): Sink<ExchangeRecord>;
  /** The keyed side's source: one split per key group, read committed only. */
  readonly source: Source<ExchangeRecord, SourceSplit>;
  /** The key group a split of `source` carries. */
  keyGroupOf(split: SourceSplit): number;
}

/**
 * How records after `keyBy` travel between subtasks that run in different processes (one process
 * per subtask, `subtaskIndex` set): a durable, exactly-once transport such as a Kafka repartition
 * topic (`kafkaRepartitionExchange` in `@onceflow/connector-kafka`). Set once per job as the
 * job option `exchange`. Each side is its own exactly-once hop: the sending side's output is
 * committed with its checkpoint, the keyed side's read positions are in its checkpoint.
 *
 * @example
 * ```ts
 * import { kafkaRepartitionExchange } from "@onceflow/connector-kafka";
 * const job = new Job({
 *   jobId: "clicks", parallelism: 2, subtaskIndex: Number(process.env.ORDINAL),
 *   checkpointing: { interval: 1000 },
 *   exchange: kafkaRepartitionExchange({ brokers: ["kafka:9092"] }),
 * });
 * ```
 */
export interface CrossProcessExchange {
  /** Shown in logs and errors, e.g. `kafka repartition topic`. */
  readonly name: string;
  /** The transport of the exchange before the keyed operator `spec.keyedUid`. */
  channel(spec: ExchangeChannelSpec): ExchangeChannel;
}
