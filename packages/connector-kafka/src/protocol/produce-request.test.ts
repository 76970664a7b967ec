import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import {
  decodeProduceResponse,
  encodeProduceRequest,
  PRODUCE_API_KEY,
  PRODUCE_API_VERSION,
  setCorrelationId,
} from "./produce-request.js";
import { encodeRecordBatch } from "./record-batch-encoder.js";

// kafkajs's own encoder/decoder read and write the reference layouts.
const requireKafkajs = createRequire(import.meta.url);
interface Decoder {
  readString(): string | null;
  readInt16(): number;
  readInt32(): number;
  readBytes(size: number): Buffer;
  readArray<T>(read: (decoder: Decoder) => T): T[];
  canReadBytes(size: number): boolean;
}
const KafkajsDecoder = requireKafkajs("kafkajs/src/protocol/decoder") as new (buffer: Buffer) => Decoder;
const KafkajsEncoder = requireKafkajs("kafkajs/src/protocol/encoder") as new () => {
  writeString(value: string): unknown;
  writeInt16(value: number): unknown;
  writeInt32(value: number): unknown;
  writeInt64(value: string): unknown;
  writeArray(values: unknown[]): unknown;
  buffer: Buffer;
};
const kafkajsRequest = requireKafkajs("kafkajs/src/protocol/request") as (request: {
  correlationId: number;
  clientId: string;
  request: { apiKey: number; apiVersion: number; encode(): Promise<unknown> };
}) => Promise<{ buffer: Buffer }>;
const produceV3Response = requireKafkajs("kafkajs/src/protocol/requests/produce/v3/response") as {
  decode(
    raw: Buffer,
  ): Promise<{ topics: Array<{ topicName: string; partitions: Array<{ partition: number }> }> }>;
};

const producer = { producerId: 4001n, producerEpoch: 3, baseSequence: 0, transactional: true };

describe("encodeProduceRequest", () => {
  it("writes the v3 layout, grouping adjacent partitions of a topic", () => {
    const a = encodeRecordBatch([{ value: "a" }], 1, producer);
    const b = encodeRecordBatch([{ value: "bb" }, { value: "c" }], 1, producer);
    const request = encodeProduceRequest({
      clientId: "onceflow-test",
      transactionalId: "tx-0",
      acks: -1,
      timeoutMs: 30_000,
      partitions: [
        { topic: "orders", partition: 0, batch: a },
        { topic: "orders", partition: 2, batch: b },
        { topic: "ünïcode", partition: 1, batch: a },
      ],
    });
    setCorrelationId(request, 1_234_567);
    const decoder = new KafkajsDecoder(request);
    expect(decoder.readInt32()).toBe(request.length - 4);
    expect(decoder.readInt16()).toBe(PRODUCE_API_KEY);
    expect(decoder.readInt16()).toBe(PRODUCE_API_VERSION);
    expect(decoder.readInt32()).toBe(1_234_567);
    expect(decoder.readString()).toBe("onceflow-test");
    expect(decoder.readString()).toBe("tx-0");
    expect(decoder.readInt16()).toBe(-1);
    expect(decoder.readInt32()).toBe(30_000);
    const topics = decoder.readArray((t) => ({
      topic: t.readString(),
      partitions: t.readArray((p) => ({ partition: p.readInt32(), batch: p.readBytes(p.readInt32()) })),
    }));
    expect(decoder.canReadBytes(1)).toBe(false);
    expect(topics).toEqual([
      {
        topic: "orders",
        partitions: [
          { partition: 0, batch: a },
          { partition: 2, batch: b },
        ],
      },
      { topic: "ünïcode", partitions: [{ partition: 1, batch: a }] },
    ]);
  });

  it("writes a null client id and a null transactional id as length -1", () => {
    const request = encodeProduceRequest({
      clientId: null,
      transactionalId: null,
      acks: 1,
      timeoutMs: 5,
      partitions: [],
    });
    const header = "0000" + "0003" + "00000000" + "ffff";
    const body = "ffff" + "0001" + "00000005" + "00000000";
    expect(request.toString("hex")).toBe("00000016" + header + body);
  });

  it("writes what kafkajs's own request framing writes around the same body", async () => {
    const batch = encodeRecordBatch([{ key: "k", value: "v" }], 1, producer);
    const fields = { transactionalId: "tx-1", acks: -1, timeoutMs: 30_000 };
    const ours = encodeProduceRequest({
      ...fields,
      clientId: "onceflow",
      partitions: [{ topic: "orders", partition: 3, batch }],
    });
    setCorrelationId(ours, 42);
    const body = ours.subarray(4 + 2 + 2 + 4 + 2 + "onceflow".length);
    const encoder = new KafkajsEncoder();
    (encoder as unknown as { writeBuffer(value: Buffer): unknown }).writeBuffer(body);
    const theirs = await kafkajsRequest({
      correlationId: 42,
      clientId: "onceflow",
      request: { apiKey: PRODUCE_API_KEY, apiVersion: PRODUCE_API_VERSION, encode: async () => encoder },
    });
    expect(ours.equals(theirs.buffer)).toBe(true);
  });
});

describe("decodeProduceResponse", () => {
  it("reads what kafkajs's v3 response decoder reads", async () => {
    const encoder = new KafkajsEncoder();
    const partition = (id: number, code: number, offset: string) => {
      const e = new KafkajsEncoder();
      e.writeInt32(id);
      e.writeInt16(code);
      e.writeInt64(offset);
      e.writeInt64("-1");
      return e;
    };
    const topic = (name: string, partitions: unknown[]) => {
      const e = new KafkajsEncoder();
      e.writeString(name);
      e.writeArray(partitions);
      return e;
    };
    encoder.writeArray([
      topic("orders", [partition(0, 0, "9007199254740993"), partition(3, 6, "-1")]),
      topic("other", [partition(1, 46, "12")]),
    ]);
    encoder.writeInt32(0);
    const raw = encoder.buffer;
    expect(decodeProduceResponse(raw)).toEqual([
      { topic: "orders", partition: 0, errorCode: 0, baseOffset: 9007199254740993n },
      { topic: "orders", partition: 3, errorCode: 6, baseOffset: -1n },
      { topic: "other", partition: 1, errorCode: 46, baseOffset: 12n },
    ]);
    const theirs = await produceV3Response.decode(raw);
    expect(theirs.topics.map((t) => [t.topicName, t.partitions.map((p) => p.partition)])).toEqual([
      ["orders", [0, 3]],
      ["other", [1]],
    ]);
  });
});
