import { MessageChannel, type MessagePort } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import type { RecordSerializer } from "../runtime/exchange/record-serializer.js";
import { type RecordBatch, StreamOperator } from "../runtime/operators/stream-operator.js";
import { StreamGraph } from "../runtime/stream-graph.js";
import type { ChannelMessage } from "./batch-channel.js";
import { decodeRecordBatch } from "./batch-encoding.js";
import { closeChannels, createThreadOperators } from "./thread-exchange-operators.js";

class Forward extends StreamOperator {
  processBatch(batch: RecordBatch): void | Promise<void> {
    return this.emit(batch);
  }
}

const stringSerializer: RecordSerializer<string> = {
  serialize: (value) => Buffer.from(value),
  deserialize: (bytes) => Buffer.from(bytes).toString(),
};

/** Subtask 0 of 2 in its thread: the batches it posts to subtask 1, with each postMessage's arguments. */
async function postedToOtherSubtask(serializer: RecordSerializer<string> | undefined) {
  const graph = new StreamGraph();
  const head = graph.add("map", [], "head", (uid) => new Forward(uid));
  graph.add("process", [head], "counts", (uid) => new Forward(uid), undefined, {
    keySelector: (value) => value,
    ...(serializer === undefined ? {} : { serializer: serializer as RecordSerializer<unknown> }),
  });
  const toOther = new MessageChannel();
  const fromOther = new MessageChannel();
  const posted: Array<{ message: ChannelMessage; transfer: unknown }> = [];
  const post = toOther.port1.postMessage.bind(toOther.port1);
  toOther.port1.postMessage = (message: ChannelMessage, transfer?: unknown) => {
    posted.push({ message, transfer });
    post(message, transfer as Parameters<MessagePort["postMessage"]>[1]);
  };
  const ports = { to: [undefined, toOther.port1], from: [undefined, fromOther.port2], capacity: 8 };
  const { operatorsOf } = createThreadOperators(
    graph.nodes,
    { subtaskIndex: 0, parallelism: 2, subtasksInProcess: 1, maxParallelism: 128 },
    () => {},
    ports,
    (error) => {
      throw error;
    },
  );
  const values = Array.from({ length: 200 }, (_, index) => `user-${index}`);
  await operatorsOf.get(0)![0]!.processBatch({ splitKey: "s0", values, timestamps: undefined });
  closeChannels(ports);
  return posted;
}

describe("the exchange between subtask threads", () => {
  for (const serializer of [undefined, stringSerializer]) {
    it(`copies each batch it sends instead of transferring it (${serializer ? "with a serializer" : "structured clones"}): the sending thread never detaches an ArrayBuffer`, async () => {
      const posted = await postedToOtherSubtask(serializer);
      const batches = posted.filter((each) => each.message.type === "batch");
      expect(batches.length).toBeGreaterThan(0);
      for (const { message, transfer } of batches) {
        expect(transfer === undefined || (Array.isArray(transfer) && transfer.length === 0)).toBe(true);
        // A transferred buffer would be detached here: length 0.
        const bytes = (message as Extract<ChannelMessage, { type: "batch" }>).bytes;
        expect(bytes.buffer.byteLength).toBeGreaterThan(0);
        const decoded = decodeRecordBatch(bytes, serializer as RecordSerializer<unknown> | undefined);
        expect(decoded.values.length).toBeGreaterThan(0);
        expect(decoded.values.every((value) => typeof value === "string" && value.startsWith("user-"))).toBe(
          true,
        );
      }
    });
  }
});
