// Turns raw fetched records into `KafkaRecord`s: key, value and header deserialization (the
// `__proto__` header included; the built-in deserializers read keys and values in place, others get
// a view), the context made only for deserializers that may read it, and the
// `onDeserializationError` policy for a record that fails (fail, skip with a metric, or dead-letter).
import {
  type Counter,
  DeserializationError,
  type Logger,
  MetricNames,
  type SourceReaderContext,
} from "@onceflow/core";
import type { Kafka, Producer } from "kafkajs";
import { HEADER_LIST, type RawRecord } from "../protocol/raw-record.js";
import { viewsOf } from "../protocol/record-batch-decoder.js";
import { NO_HEADERS } from "../protocol/record-columns.js";
import {
  type DeserializationContext,
  type Deserializer,
  ignoresContext,
  rangeDeserializerOf,
} from "./deserializer.js";
import { splitIdOf } from "./kafka-partition-split.js";
import type { KafkaHeader, KafkaRecord } from "./kafka-record.js";
import type { DeserializationErrorPolicy } from "./kafka-source-options.js";
import type { PartitionState } from "./partition-state.js";
import { headersByName, NO_RECORD_HEADERS } from "./record-headers.js";

/** The reader settings a {@link RecordDecoder} uses. */
export interface RecordDecoderConfig<K, V, H> {
  readonly kafka: Kafka;
  readonly key: Deserializer<K>;
  readonly value: Deserializer<V>;
  readonly headers: Deserializer<H>;
  readonly onDeserializationError: DeserializationErrorPolicy;
}

/** The headers of every record without headers: frozen, so no consumer can change another's. */
const NO_HEADER_LIST: readonly never[] = Object.freeze([]);

/** Deserializes the key or value at `data[start, end)`. */
type ReadBytes<T> = (data: Buffer, start: number, end: number, context: DeserializationContext) => T;

/**
 * How `deserializer` reads bytes in the fetched data: a built-in one in place (no Buffer view per
 * record), any other from a view made here, as its interface promises.
 */
function readerOf<T>(deserializer: Deserializer<T>): ReadBytes<T> {
  return (
    rangeDeserializerOf(deserializer) ??
    ((data, start, end, context) => deserializer.deserialize(data.subarray(start, end), context))
  );
}

/** A record that could not be deserialized: where it is, and the error, for the policy to handle. */
export class Undeserializable {
  constructor(
    readonly context: DeserializationContext,
    readonly error: unknown,
  ) {}
}

/**
 * Deserializes the records of a reader's partitions and applies its deserialization-error policy,
 * counting skipped and dead-lettered records.
 */
export class RecordDecoder<K, V, H> {
  private readonly skipped: Counter;
  private readonly deadLettered: Counter;
  private readonly labels: Record<string, string>;
  private deadLetterProducer: Producer | undefined;
  /** Whether a deserializer may read the context: else one is made only for a record that fails. */
  private readonly needsContext: boolean;
  private readonly readKey: ReadBytes<K>;
  private readonly readValue: ReadBytes<V>;

  constructor(
    private readonly config: RecordDecoderConfig<K, V, H>,
    context: SourceReaderContext,
    private readonly logger: Logger,
  ) {
    this.needsContext = !(
      ignoresContext(config.key) &&
      ignoresContext(config.value) &&
      ignoresContext(config.headers)
    );
    this.readKey = readerOf(config.key);
    this.readValue = readerOf(config.value);
    this.labels = {
      job: context.jobId,
      operator: context.operatorUid,
      subtask: String(context.subtaskIndex),
    };
    this.skipped = context.metrics.counter(MetricNames.recordsSkipped, "Records skipped by a source");
    this.deadLettered = context.metrics.counter(
      MetricNames.recordsDeadLettered,
      "Records written to a dead-letter topic",
    );
    this.skipped.inc(0, this.labels);
    this.deadLettered.inc(0, this.labels);
  }

  /** The record, or what went wrong for {@link onDeserializationError} to handle. */
  deserialize(state: PartitionState, raw: RawRecord): KafkaRecord<K, V, H> | Undeserializable {
    const offset = String(raw.offset);
    // A fresh context per record where a deserializer may read (and keep) it; the built-in ones
    // never do, so they get the partition's (its offset unset) and a failure gets its own below.
    const context: DeserializationContext = this.needsContext
      ? { topic: state.topic, partition: state.partition, offset }
      : state.context;
    try {
      // Headers first, then key, then value: the first to throw is the record's error.
      const { headers, headerList } =
        raw.headers === NO_HEADERS
          ? { headers: NO_RECORD_HEADERS, headerList: NO_HEADER_LIST }
          : this.deserializeHeaders(raw.headers, context);
      const { data, keyStart, keyLength, valueStart, valueLength } = raw;
      return {
        topic: state.topic,
        partition: state.partition,
        offset,
        timestamp: raw.timestamp,
        key: keyLength < 0 ? null : this.readKey(data, keyStart, keyStart + keyLength, context),
        value: valueLength < 0 ? null : this.readValue(data, valueStart, valueStart + valueLength, context),
        headers,
        headerList,
      };
    } catch (error) {
      return new Undeserializable(
        this.needsContext ? context : { topic: state.topic, partition: state.partition, offset },
        error,
      );
    }
  }

  /**
   * Deserializes `raw` headers, each value once, into the name map and the ordered list (a throw is
   * the record's deserialization error).
   */
  private deserializeHeaders(
    raw: RawRecord["headers"],
    context: DeserializationContext,
  ): { headers: Record<string, H | null | Array<H | null>>; headerList: Array<KafkaHeader<H>> } {
    const headerList: Array<KafkaHeader<H>> = [];
    const header = (bytes: Buffer | null): H | null =>
      bytes === null ? null : this.config.headers.deserialize(bytes, context);
    // The decoder's order; a record decoded by kafkajs (old Fetch versions) has names in a row.
    const ordered = raw[HEADER_LIST] ?? rawHeaderList(raw);
    for (const [name, bytes] of ordered) headerList.push([name, header(bytes)]);
    const headers = headersByName(headerList);
    return { headers, headerList };
  }

  async onDeserializationError(
    context: DeserializationContext,
    raw: RawRecord,
    error: unknown,
  ): Promise<undefined> {
    const reason = error instanceof Error ? error.message : String(error);
    const where = `topic '${context.topic}' partition ${context.partition} offset ${context.offset}`;
    const policy = this.config.onDeserializationError;
    if (policy === "fail") {
      throw new DeserializationError(
        `cannot deserialize the record at ${where}: ${reason}. Fix the producer, or set onDeserializationError to "skip" or { deadLetterTopic } to go on without it.`,
        {
          cause: error,
          details: {
            ...context,
            splitId: splitIdOf(context.topic, context.partition),
            position: context.offset,
          },
        },
      );
    }
    if (policy === "skip") {
      this.logger.warn({ ...context, error: reason }, "skipped a record that cannot be deserialized");
      this.skipped.inc(1, this.labels);
      return undefined;
    }
    // Awaited before the position moves past the record, so a checkpoint never skips an unwritten one.
    this.deadLetterProducer ??= await this.connectDeadLetterProducer();
    // kafkajs writes a null header value as Kafka's null (length -1), though its typings omit null.
    const headers = {} as Record<string, Buffer | Buffer[] | string>;
    for (const [name, value] of Object.entries(raw.headers)) {
      if (value !== undefined) headers[name] = value as Buffer | Buffer[];
    }
    const { key, value } = viewsOf(raw);
    await this.deadLetterProducer.send({
      topic: policy.deadLetterTopic,
      messages: [
        {
          key,
          value,
          timestamp: String(raw.timestamp),
          headers: {
            ...headers,
            "onceflow.error": reason,
            "onceflow.topic": context.topic,
            "onceflow.partition": String(context.partition),
            "onceflow.offset": context.offset,
          },
        },
      ],
    });
    this.deadLettered.inc(1, this.labels);
    return undefined;
  }

  private async connectDeadLetterProducer(): Promise<Producer> {
    const producer = this.config.kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    return producer;
  }

  /** Disconnects the dead-letter producer, if one was connected. */
  disconnect(): Promise<void> | undefined {
    return this.deadLetterProducer?.disconnect();
  }
}

/** The headers of a name map in a list: names in the map's order, a repeated name's values in a row. */
function rawHeaderList(raw: RawRecord["headers"]): Array<readonly [string, Buffer | null]> {
  const list: Array<readonly [string, Buffer | null]> = [];
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const each of Array.isArray(value) ? value : [value]) list.push([name, each]);
  }
  return list;
}
