import {
  createMemoryLogger,
  createMemoryMetrics,
  isOnceflowError,
  MetricNames,
  type SourceReaderContext,
} from "@onceflow/core";
import type { Kafka, Message } from "kafkajs";
import { describe, expect, it } from "vitest";
import { NO_HEADERS, type RawRecord, rawRecordOf } from "../protocol/record-batch-decoder.js";
import {
  type DeserializationContext,
  type Deserializer,
  Deserializers,
  rangeDeserializerOf,
} from "./deserializer.js";
import type { DeserializationErrorPolicy } from "./kafka-source-options.js";
import type { PartitionState } from "./partition-state.js";
import { RecordDecoder, Undeserializable } from "./record-decoder.js";

const TOPIC = "orders";
const PARTITION = 3;

/** What the decoder reads of a partition's state: its coordinates and its shared context. */
const state = {
  topic: TOPIC,
  partition: PARTITION,
  context: Object.freeze({ topic: TOPIC, partition: PARTITION, offset: "" }),
} as unknown as PartitionState;

/** A Kafka whose dead-letter producer keeps what it is sent. */
function fakeKafka(): { kafka: Kafka; sent: Message[] } {
  const sent: Message[] = [];
  const producer = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    send: async (request: { messages: Message[] }) => {
      sent.push(...request.messages);
      return [];
    },
  };
  return { kafka: { producer: () => producer } as unknown as Kafka, sent };
}

function decoderOf<K, V, H = string>(
  options: {
    key?: Deserializer<K>;
    value?: Deserializer<V>;
    headers?: Deserializer<H>;
    onDeserializationError?: DeserializationErrorPolicy;
  } = {},
) {
  const metrics = createMemoryMetrics();
  const logger = createMemoryLogger();
  const { kafka, sent } = fakeKafka();
  const context: SourceReaderContext = {
    jobId: "job",
    operatorUid: "source",
    subtaskIndex: 0,
    parallelism: 1,
    isRestored: false,
    checkpointingInterval: undefined,
    logger,
    metrics,
  };
  const decoder = new RecordDecoder<K, V, H>(
    {
      kafka,
      key: options.key ?? (Deserializers.string() as unknown as Deserializer<K>),
      value: options.value ?? (Deserializers.string() as unknown as Deserializer<V>),
      headers: options.headers ?? (Deserializers.string() as unknown as Deserializer<H>),
      onDeserializationError: options.onDeserializationError ?? "fail",
    },
    context,
    logger,
  );
  return { decoder, metrics, logger, sent };
}

/** A record as the fetch decoder leaves it: key and value somewhere inside a larger response. */
function fetched(
  key: string | null,
  value: string | null,
  headers: RawRecord["headers"] = NO_HEADERS,
  offset = 41,
): RawRecord {
  const response = Buffer.alloc(64, "#");
  const keyAt = 5;
  const valueAt = 30;
  if (key !== null) response.write(key, keyAt);
  if (value !== null) response.write(value, valueAt);
  const k = key === null ? null : response.subarray(keyAt, keyAt + Buffer.byteLength(key));
  const v = value === null ? null : response.subarray(valueAt, valueAt + Buffer.byteLength(value));
  const raw = rawRecordOf({ offset, timestamp: 1_700_000_000_000, key: k, value: v, headers });
  if (k !== null || v !== null) expect(raw.data.buffer).toBe(response.buffer); // not a copy
  return raw;
}

function decoded<K, V, H>(result: ReturnType<RecordDecoder<K, V, H>["deserialize"]>) {
  if (result instanceof Undeserializable) throw result.error;
  return result;
}

describe("the built-in deserializers' range form", () => {
  it("reads data[start, end) as deserialize reads a Buffer of those bytes", () => {
    const data = Buffer.from('xx{"a":[1,"é"]}yy');
    const [start, end] = [2, data.length - 2];
    const bytes = data.subarray(start, end);
    for (const deserializer of [Deserializers.string(), Deserializers.json(), Deserializers.buffer()]) {
      const range = rangeDeserializerOf<unknown>(deserializer);
      expect(range).toBeDefined();
      expect(range?.(data, start, end)).toEqual(deserializer.deserialize(bytes, state.context));
    }
    // Empty bytes: "", an empty Buffer, and for JSON the same error as deserialize.
    expect(rangeDeserializerOf(Deserializers.string())?.(data, 4, 4)).toBe("");
    expect(rangeDeserializerOf(Deserializers.buffer())?.(data, 4, 4)).toEqual(Buffer.alloc(0));
    expect(() => rangeDeserializerOf(Deserializers.json())?.(data, 4, 4)).toThrow(SyntaxError);
    expect(() => Deserializers.json().deserialize(Buffer.alloc(0), state.context)).toThrow(SyntaxError);
    expect(rangeDeserializerOf(Deserializers.string())?.(data, start, end)).toBe('{"a":[1,"é"]}');
    expect(rangeDeserializerOf(Deserializers.json())?.(data, start, end)).toEqual({ a: [1, "é"] });
    const view = rangeDeserializerOf(Deserializers.buffer())?.(data, start, end) as Buffer;
    expect(view.buffer).toBe(data.buffer); // a view, as deserialize gives its own bytes
    expect(view.toString()).toBe('{"a":[1,"é"]}');
  });

  it("is the built-ins' own: a user's deserializer has none", () => {
    expect(rangeDeserializerOf({ deserialize: (bytes) => bytes.length })).toBeUndefined();
    // The function is the key: the built-in's function in another object still counts.
    expect(rangeDeserializerOf({ deserialize: Deserializers.string().deserialize })).toBeDefined();
    expect(Deserializers.buffer().deserialize(Buffer.from("b"), state.context).toString()).toBe("b");
  });
});

describe("RecordDecoder", () => {
  it("deserializes keys and values in place with string(), json() and buffer()", () => {
    const strings = decoderOf().decoder;
    expect(decoded(strings.deserialize(state, fetched("k-1", "hello é")))).toEqual({
      topic: TOPIC,
      partition: PARTITION,
      offset: "41",
      timestamp: 1_700_000_000_000,
      key: "k-1",
      value: "hello é",
      headers: {},
      headerList: [],
    });
    const json = decoderOf({ key: Deserializers.json<number>(), value: Deserializers.json<{ n: number }>() });
    const record = decoded(json.decoder.deserialize(state, fetched("7", '{"n":1}')));
    expect([record.key, record.value]).toEqual([7, { n: 1 }]);
    const buffers = decoderOf({ key: Deserializers.buffer(), value: Deserializers.buffer() }).decoder;
    const raw = fetched("k", "v");
    const bytes = decoded(buffers.deserialize(state, raw));
    expect([bytes.key?.toString(), bytes.value?.toString()]).toEqual(["k", "v"]);
    // Views of the fetched bytes, as before.
    expect(bytes.value?.buffer).toBe(raw.data.buffer);
  });

  it("gives a user's deserializer a Buffer of exactly the key's or value's bytes, and its context", () => {
    const seen: Array<[string, boolean, DeserializationContext]> = [];
    const upper: Deserializer<string> = {
      deserialize: (bytes, context) => {
        seen.push([bytes.toString(), Buffer.isBuffer(bytes), context]);
        return bytes.toString().toUpperCase();
      },
    };
    // A user's value deserializer beside the built-in key one.
    const { decoder } = decoderOf({ value: upper });
    const record = decoded(decoder.deserialize(state, fetched("k", "abc", NO_HEADERS, 9)));
    expect([record.key, record.value]).toEqual(["k", "ABC"]);
    expect(seen).toEqual([["abc", true, { topic: TOPIC, partition: PARTITION, offset: "9" }]]);
    // A user's key deserializer too.
    const both = decoderOf({ key: upper, value: upper }).decoder;
    expect(decoded(both.deserialize(state, fetched("x", "y"))).key).toBe("X");
    expect(seen.slice(1).map(([bytes]) => bytes)).toEqual(["x", "y"]);
  });

  it("gives null for a null key or value without calling the deserializer; an empty one is deserialized", () => {
    let calls = 0;
    const counting: Deserializer<string> = {
      deserialize: (bytes) => {
        calls++;
        return bytes.toString();
      },
    };
    for (const { decoder } of [decoderOf(), decoderOf({ key: counting, value: counting })]) {
      const tombstone = decoded(decoder.deserialize(state, fetched("k", null)));
      expect([tombstone.key, tombstone.value]).toEqual(["k", null]);
      const keyless = decoded(decoder.deserialize(state, fetched(null, "v")));
      expect([keyless.key, keyless.value]).toEqual([null, "v"]);
      const nothing = decoded(decoder.deserialize(state, fetched(null, null)));
      expect([nothing.key, nothing.value]).toEqual([null, null]);
      const empty = decoded(decoder.deserialize(state, fetched("", "")));
      expect([empty.key, empty.value]).toEqual(["", ""]);
    }
    expect(calls).toBe(4); // k, v, and the empty key and value
  });

  it("gives every record without headers one shared, frozen, empty headers object", () => {
    const { decoder } = decoderOf();
    const first = decoded(decoder.deserialize(state, fetched("a", "1")));
    const second = decoded(decoder.deserialize(state, fetched("b", "2")));
    expect(first.headers).toEqual({});
    expect(Object.isFrozen(first.headers)).toBe(true);
    expect(second.headers).toBe(first.headers);
    expect(() => {
      (first.headers as Record<string, unknown>).added = "x";
    }).toThrow(TypeError);
    // A record with headers still gets its own, deserialized.
    const headers = { origin: Buffer.from("test"), empty: null, twice: [Buffer.from("a"), null] };
    const withHeaders = decoded(decoder.deserialize(state, fetched("c", "3", headers)));
    expect(withHeaders.headers).toEqual({ origin: "test", empty: null, twice: ["a", null] });
    expect(withHeaders.headers).not.toBe(first.headers);
    expect(Object.isFrozen(withHeaders.headers)).toBe(false);
  });

  it("sends a record that fails to the policy with its topic, partition and offset", async () => {
    // A value that is no JSON: the built-in json() fails on the bytes it reads in place.
    const where = { topic: TOPIC, partition: PARTITION, offset: "41" };
    const failing = decoderOf({ value: Deserializers.json() });
    const raw = fetched("k", "not json");
    const result = failing.decoder.deserialize(state, raw);
    expect(result).toBeInstanceOf(Undeserializable);
    const { context, error } = result as Undeserializable;
    expect(context).toEqual(where);
    expect(error).toBeInstanceOf(SyntaxError);
    const thrown = await failing.decoder.onDeserializationError(context, raw, error).catch((e: unknown) => e);
    expect(isOnceflowError(thrown) && thrown.code).toBe("DESERIALIZATION_FAILED");
    expect((thrown as Error).message).toContain(`topic '${TOPIC}' partition ${PARTITION} offset 41`);
    expect((thrown as { details?: unknown }).details).toMatchObject({ ...where, position: "41" });

    // A user's deserializer that throws: the same, with the context it was given.
    const contexts: DeserializationContext[] = [];
    const throwing: Deserializer<string> = {
      deserialize: (_bytes, c) => {
        contexts.push(c);
        throw new Error("no");
      },
    };
    const skipping = decoderOf({ key: throwing, onDeserializationError: "skip" });
    const skipped = skipping.decoder.deserialize(state, raw) as Undeserializable;
    expect(skipped.context).toEqual(where);
    expect(contexts).toEqual([where]);
    await skipping.decoder.onDeserializationError(skipped.context, raw, skipped.error);
    expect(skipping.metrics.read(MetricNames.recordsSkipped)).toBe(1);
    expect(skipping.logger.entries.at(-1)?.fields).toMatchObject({ ...where, error: "no" });

    // Dead-lettered: the raw key, value and headers as fetched, with the error and the origin.
    const dead = decoderOf({
      value: Deserializers.json(),
      onDeserializationError: { deadLetterTopic: "dlq" },
    });
    const withHeaders = fetched("k", "not json", { origin: Buffer.from("test") });
    const failed = dead.decoder.deserialize(state, withHeaders) as Undeserializable;
    await dead.decoder.onDeserializationError(failed.context, withHeaders, failed.error);
    expect(dead.metrics.read(MetricNames.recordsDeadLettered)).toBe(1);
    const [message] = dead.sent;
    expect(message?.key?.toString()).toBe("k");
    expect(message?.value?.toString()).toBe("not json");
    expect(message?.timestamp).toBe("1700000000000");
    expect(message?.headers).toMatchObject({
      origin: Buffer.from("test"),
      "onceflow.topic": TOPIC,
      "onceflow.partition": String(PARTITION),
      "onceflow.offset": "41",
    });
  });
});
