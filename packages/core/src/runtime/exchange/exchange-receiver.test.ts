import { describe, expect, it } from "vitest";
import type { SourceBatch, SourceReader, SourceSplit } from "../../source/source.js";
import type { ExchangeControlRecord, ExchangeRecord } from "./cross-process-exchange.js";
import { ChannelReader } from "./exchange-receiver.js";

/** Hands out queued batches of exchange records, as a transport's reader would. */
class QueuedReader implements SourceReader<ExchangeRecord, SourceSplit> {
  readonly queue: Array<SourceBatch<ExchangeRecord>> = [];
  addSplits(): void {}
  pollNext(): SourceBatch<ExchangeRecord> | undefined {
    return this.queue.shift();
  }
  isAvailable(): Promise<void> {
    return Promise.resolve();
  }
  isFinished(): boolean {
    return false;
  }
  snapshotState(): SourceSplit[] {
    return [{ splitId: "0" }, { splitId: "1" }];
  }
  async close(): Promise<void> {}
}

const control = (
  keyGroup: number,
  sender: number,
  watermark: number,
  more: Partial<ExchangeControlRecord> = {},
): ExchangeControlRecord => ({
  kind: "control",
  keyGroup,
  sender,
  senderParallelism: 2,
  watermark,
  idle: false,
  ended: false,
  ...more,
});

async function readerWith(parallelism = 2): Promise<{ reader: ChannelReader; inner: QueuedReader }> {
  const inner = new QueuedReader();
  const reader = new ChannelReader(inner, parallelism);
  await reader.addSplits([
    { splitId: "0", keyGroup: 0, inner: { splitId: "0" }, senders: [] },
    { splitId: "1", keyGroup: 1, inner: { splitId: "1" }, senders: [] },
  ]);
  return { reader, inner };
}

describe("the keyed side of an exchange between processes", () => {
  it("takes control records out of the stream and hands the data on with its event times", async () => {
    const { reader, inner } = await readerWith();
    inner.queue.push({
      splitId: "0",
      records: [
        { kind: "data", keyGroup: 0, value: "a", timestamp: 5 },
        control(0, 0, 4),
        { kind: "data", keyGroup: 0, value: "b", timestamp: 7 },
      ],
    });
    expect(await reader.pollNext()).toEqual({ splitId: "0", records: ["a", "b"], timestamps: [5, 7] });
  });

  it("holds event time at the minimum over key groups and senders, counting a sender not heard from", async () => {
    const { reader, inner } = await readerWith();
    inner.queue.push({ splitId: "0", records: [control(0, 0, 100), control(0, 1, 50)] });
    inner.queue.push({ splitId: "1", records: [control(1, 0, 80)] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: -Infinity, idle: false });
    inner.queue.push({ splitId: "1", records: [control(1, 1, 90)] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 50, idle: false });
    // A restarted sender writes a lower watermark: it never goes back.
    inner.queue.push({ splitId: "0", records: [control(0, 1, 10), control(0, 1, 60)] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 60, idle: false });
  });

  it("leaves idle and ended senders out, is idle when all left are idle, and ends when all ended", async () => {
    const { reader, inner } = await readerWith();
    inner.queue.push({ splitId: "0", records: [control(0, 0, 30), control(0, 1, 0, { idle: true })] });
    inner.queue.push({ splitId: "1", records: [control(1, 0, 40), control(1, 1, 0, { idle: true })] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 30, idle: false });
    inner.queue.push({
      splitId: "0",
      records: [control(0, 0, Infinity, { ended: true }), control(0, 1, 0, { idle: true })],
    });
    inner.queue.push({ splitId: "1", records: [control(1, 0, Infinity, { ended: true })] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 0, idle: true });
    expect(reader.isFinished()).toBe(false);
    inner.queue.push({ splitId: "0", records: [control(0, 1, Infinity, { ended: true })] });
    inner.queue.push({ splitId: "1", records: [control(1, 1, Infinity, { ended: true })] });
    await reader.pollNext();
    expect(reader.isFinished()).toBe(true);
  });

  it("a sender idle in one key group but active in another holds event time back in both", async () => {
    const { reader, inner } = await readerWith();
    inner.queue.push({
      splitId: "0",
      records: [control(0, 0, 10, { idle: true }), control(0, 1, 10, { idle: true })],
    });
    inner.queue.push({
      splitId: "1",
      records: [control(1, 0, 10, { idle: true }), control(1, 1, 10, { idle: true })],
    });
    await reader.pollNext();
    // Sender 0 resumed: its newer control record is read in key group 0, not yet in key group 1,
    // where its records may be ahead.
    inner.queue.push({ splitId: "0", records: [control(0, 0, 900)] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 10, idle: false });
  });

  it("when every sender is idle, is idle at the highest watermark they reached", async () => {
    const { reader, inner } = await readerWith();
    inner.queue.push({
      splitId: "0",
      records: [control(0, 0, 900, { idle: true }), control(0, 1, 0, { idle: true })],
    });
    inner.queue.push({
      splitId: "1",
      records: [control(1, 0, 900, { idle: true }), control(1, 1, 0, { idle: true })],
    });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 900, idle: true });
  });

  it("after a rescale, counts old senders until the new parallelism's first control record in a key group", async () => {
    const inner = new QueuedReader();
    const reader = new ChannelReader(inner, 1);
    await reader.addSplits([
      {
        splitId: "0",
        keyGroup: 0,
        inner: { splitId: "0" },
        senders: [
          [0, { senderParallelism: 3, watermark: 500, idle: false, ended: false }],
          [1, { senderParallelism: 3, watermark: 400, idle: false, ended: false }],
          [2, { senderParallelism: 3, watermark: 200, idle: false, ended: false }],
        ],
      },
    ]);
    // Sender 2 of the old three may still have records ahead in the partition: it holds time back.
    expect(reader.eventTime()).toEqual({ watermark: 200, idle: false });
    inner.queue.push({ splitId: "0", records: [{ ...control(0, 0, 300), senderParallelism: 1 }] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 300, idle: false });
  });

  it("after a rescale down, an old sender not heard from in a key group holds event time back", async () => {
    // Restored at parallelism 1 from a subtask of parallelism 3 that had read control records of
    // senders 0 and 1 only: sender 2 (started last, say) may have records ahead in the partition.
    const inner = new QueuedReader();
    const reader = new ChannelReader(inner, 1);
    await reader.addSplits([
      {
        splitId: "0",
        keyGroup: 0,
        inner: { splitId: "0" },
        senders: [
          [0, { senderParallelism: 3, watermark: 500, idle: false, ended: false }],
          [1, { senderParallelism: 3, watermark: 400, idle: false, ended: false }],
        ],
      },
    ]);
    expect(reader.eventTime()).toEqual({ watermark: -Infinity, idle: false });
    inner.queue.push({ splitId: "0", records: [{ ...control(0, 2, 300), senderParallelism: 3 }] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 300, idle: false });
    // The new parallelism's first control record: the old senders' records are all behind it.
    inner.queue.push({ splitId: "0", records: [{ ...control(0, 0, 700), senderParallelism: 1 }] });
    await reader.pollNext();
    expect(reader.eventTime()).toEqual({ watermark: 700, idle: false });
  });
});
