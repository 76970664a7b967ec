import { describe, expect, it } from "vitest";
import { type DecodedMessage, ownHeaders, withoutAborted } from "./internals.js";

function record(
  offset: number,
  producerId: string,
  options: { control?: "commit" | "abort"; txn?: boolean } = {},
): DecodedMessage {
  return {
    offset: String(offset),
    timestamp: "0",
    key: options.control === undefined ? null : Buffer.from([0, 0, 0, options.control === "abort" ? 0 : 1]),
    value: options.control === undefined ? Buffer.from(`${producerId}@${offset}`) : null,
    headers: {},
    isControlRecord: options.control !== undefined,
    batchContext: {
      firstOffset: String(offset),
      lastOffsetDelta: 0,
      producerId,
      inTransaction: options.txn ?? true,
    },
  };
}

const values = (messages: DecodedMessage[]) => messages.map((m) => m.value?.toString());

describe("withoutAborted", () => {
  it("drops aborted records of interleaved producers even when the broker's list is not sorted", () => {
    const messages = [
      record(0, "A"),
      record(1, "B"),
      record(2, "A"),
      record(3, "B"),
      record(4, "A", { control: "abort" }),
      record(5, "B", { control: "commit" }),
      record(6, "A"),
    ];
    // B committed; A's transaction at 0 aborted; listed out of order with a later unrelated entry.
    const aborted = [
      { producerId: "C", firstOffset: "100" },
      { producerId: "A", firstOffset: "0" },
    ];
    expect(values(withoutAborted(messages, aborted))).toEqual(["B@1", "B@3", "A@6"]);
  });

  it("enters every aborted transaction that began before the first record fetched", () => {
    const messages = [
      record(10, "A"),
      record(11, "B"),
      record(12, "B", { control: "abort" }),
      record(13, "A", { control: "abort" }),
    ];
    const aborted = [
      { producerId: "B", firstOffset: "3" },
      { producerId: "A", firstOffset: "5" },
    ];
    expect(values(withoutAborted(messages, aborted))).toEqual([]);
  });

  it("keeps non-transactional records and drops control records", () => {
    const messages = [record(0, "P", { txn: false }), record(1, "Q"), record(2, "Q", { control: "commit" })];
    expect(values(withoutAborted(messages, []))).toEqual(["P@0", "Q@1"]);
  });
});

describe("ownHeaders", () => {
  it("drops what kafkajs's decoder took from Object.prototype for headers named like its members", () => {
    const a = Buffer.from("a");
    const b = Buffer.from("b");
    // As kafkajs 2.2.4 decodes { valueOf: a }, { toString: a, toString: b }, { plain: a }, { empty: null }.
    const decoded = {
      valueOf: [Object.prototype.valueOf, a],
      toString: [Object.prototype.toString, a, b],
      __proto__name: a,
      plain: a,
      empty: null,
      twice: [a, b],
    };
    expect(ownHeaders(decoded)).toEqual({
      valueOf: a,
      toString: [a, b],
      __proto__name: a,
      plain: a,
      empty: null,
      twice: [a, b],
    });
  });
});
