import { MessageChannel } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { BatchChannelReceiver, BatchChannelSender, type ChannelMessage } from "./batch-channel.js";

describe("BatchChannel: bounded, in order, held on a barrier", () => {
  it("a fast sender into a slow receiver never has more than the capacity in flight", async () => {
    const { port1, port2 } = new MessageChannel();
    const sender = new BatchChannelSender(port1, 4);
    const received: number[] = [];
    const receiver = new BatchChannelReceiver(
      port2,
      async (message) => {
        if (message.type !== "watermark") return;
        received.push(message.watermark);
        // The receiving subtask is slow (it owns the hot key).
        await new Promise<void>((resolve) => setTimeout(resolve, received.length % 50 === 0 ? 5 : 0));
      },
      (error) => {
        throw error;
      },
    );
    for (let index = 0; index < 500; index++) await sender.send({ type: "watermark", watermark: index });
    while (received.length < 500) await new Promise<void>((resolve) => setTimeout(resolve, 5));
    expect(received).toEqual(Array.from({ length: 500 }, (_, index) => index));
    expect(sender.maxInFlight).toBe(4);
    expect(receiver.maxQueued).toBeLessThanOrEqual(4);
    sender.close();
    receiver.close();
  });

  it("a held channel handles nothing after the barrier until released, and its sender waits for room", async () => {
    const { port1, port2 } = new MessageChannel();
    const sender = new BatchChannelSender(port1, 3);
    const handled: ChannelMessage["type"][] = [];
    const receiver: BatchChannelReceiver = new BatchChannelReceiver(
      port2,
      (message) => {
        handled.push(message.type);
        if (message.type === "barrier") receiver.hold();
      },
      () => {},
    );
    await sender.send({ type: "idle", idle: false });
    await sender.send({ type: "barrier", checkpointId: 1 });
    let sent = 0;
    const sending = (async () => {
      for (let index = 0; index < 5; index++) {
        await sender.send({ type: "watermark", watermark: index });
        sent++;
      }
    })();
    await new Promise<void>((resolve) => setTimeout(resolve, 50));
    expect(handled).toEqual(["idle", "barrier"]);
    expect(sent).toBe(3); // the capacity: the held channel returns no credit
    receiver.release();
    await sending;
    while (handled.length < 7) await new Promise<void>((resolve) => setTimeout(resolve, 5));
    expect(handled.slice(2)).toEqual(["watermark", "watermark", "watermark", "watermark", "watermark"]);
    sender.cancel();
    await expect(sender.send({ type: "end" })).rejects.toThrow(/attempt ended/);
    sender.close();
    receiver.close();
  });
});
