import { describe, expect, it } from "vitest";
import type { KafkaRecord } from "./kafka-record.js";
import { kafkaRecordSerializer } from "./kafka-record-serializer.js";
import { headersByName } from "./record-headers.js";

function record<K, V, H>(
  fields: Partial<KafkaRecord<K, V, H>> & Pick<KafkaRecord<K, V, H>, "key" | "value">,
): KafkaRecord<K, V, H> {
  const headerList = fields.headerList ?? [];
  return {
    topic: "clicks",
    partition: 3,
    offset: "9007199254740993",
    timestamp: 1_733_430_000_123,
    headers: headersByName(headerList),
    headerList,
    ...fields,
  };
}

describe("kafkaRecordSerializer: KafkaSource records across an exchange", () => {
  it("gives back string keys and Buffer values as they were, with topic, partition, offset and timestamp", () => {
    const serializer = kafkaRecordSerializer<string, Buffer>();
    const original = record<string, Buffer, string>({ key: "user-7", value: Buffer.from([0, 1, 2, 255]) });
    const copy = serializer.deserialize(serializer.serialize(original));
    expect(copy).toEqual(original);
    expect(Buffer.isBuffer(copy.value)).toBe(true);
  });

  it("keeps null keys and values (tombstones), empty strings and text beyond ASCII", () => {
    const serializer = kafkaRecordSerializer<string, string>();
    for (const original of [
      record<string, string, string>({ key: null, value: null }),
      record<string, string, string>({ key: "", value: "" }),
      record<string, string, string>({ key: "ключ", value: "🙂 €", topic: "tópico" }),
    ]) {
      expect(serializer.deserialize(serializer.serialize(original))).toEqual(original);
    }
  });

  it("keeps values a deserializer parsed (objects, numbers, bigints) as structured clones", () => {
    const serializer = kafkaRecordSerializer<number, { user: string; at: Date; amount: bigint }>();
    const original = record<number, { user: string; at: Date; amount: bigint }, string>({
      key: 42,
      value: { user: "a", at: new Date(7), amount: 10n ** 20n },
    });
    expect(serializer.deserialize(serializer.serialize(original))).toEqual(original);
  });

  it("keeps headers in order, repeated names as arrays in `headers`, null header values and a header named __proto__", () => {
    const serializer = kafkaRecordSerializer<string, string, string | Buffer>();
    const headerList = [
      ["trace", "t-1"],
      ["tag", "x"],
      ["__proto__", "not a prototype"],
      ["tag", null],
      ["raw", Buffer.from("bytes")],
    ] as const;
    const original = record<string, string, string | Buffer>({ key: "k", value: "v", headerList });
    const copy = serializer.deserialize(serializer.serialize(original));
    expect(copy.headerList).toEqual(headerList);
    expect(copy.headers.tag).toEqual(["x", null]);
    expect(Object.getOwnPropertyDescriptor(copy.headers, "__proto__")?.value).toBe("not a prototype");
    expect(Object.getPrototypeOf(copy.headers)).toBe(Object.prototype);
    expect(copy).toEqual(original);
  });

  it("serializes one record after another into bytes of their own (a later record never overwrites an earlier one)", () => {
    const serializer = kafkaRecordSerializer<string, Buffer>();
    const large = record<string, Buffer, string>({ key: "big", value: Buffer.alloc(100_000, 7) });
    const small = record<string, Buffer, string>({ key: "small", value: Buffer.from("s") });
    const first = serializer.serialize(small);
    const second = serializer.serialize(large);
    const third = serializer.serialize(small);
    expect(serializer.deserialize(first)).toEqual(small);
    expect(serializer.deserialize(second)).toEqual(large);
    expect(Buffer.compare(Buffer.from(first), Buffer.from(third))).toBe(0);
  });

  it("keeps each record's topic when records of several topics cross in any order", () => {
    const writer = kafkaRecordSerializer<string, string>();
    const reader = kafkaRecordSerializer<string, string>();
    const records = ["orders", "clicks", "orders", "clicks-eu", "clicks"].map((topic, index) =>
      record<string, string, string>({ topic, key: String(index), value: "v" }),
    );
    const bytes = records.map((each) => writer.serialize(each));
    for (const index of [4, 0, 1, 3, 2, 2]) expect(reader.deserialize(bytes[index]!)).toEqual(records[index]);
  });
});
