import type { MessagePort } from "node:worker_threads";
import { OnceflowError } from "../errors/onceflow-error.js";

/**
 * What crosses a channel between two subtask threads, in order: record batches (encoded by
 * `encodeRecordBatch`: with the `keyBy`'s serializer, or structured clones, so Buffers, Dates, Maps
 * and bigints arrive as they left), watermarks, idleness, checkpoint barriers and the end of input.
 *
 * A batch's bytes are copied, never transferred: transferring detaches the sender's ArrayBuffer,
 * and once an isolate has detached one, V8 makes every optimized typed-array access in that thread
 * check for detachment — user code looping over a Buffer ran 30 % slower for the rest of the run.
 * The copy costs one memcpy per batch.
 *
 * @example
 * ```ts
 * const barrier: ChannelMessage = { type: "barrier", checkpointId: 7 };
 * ```
 */
export type ChannelMessage =
  | { readonly type: "batch"; readonly bytes: Uint8Array }
  | { readonly type: "watermark"; readonly watermark: number }
  | { readonly type: "idle"; readonly idle: boolean }
  | { readonly type: "barrier"; readonly checkpointId: number }
  | { readonly type: "end" };

/**
 * How many messages a channel holds at most (sent and not yet handled by the receiver): a sender
 * with this many in flight waits. With batches of the sources' size this bounds the memory of an
 * exchange whatever the skew: a subtask that receives every record slows its senders down.
 */
export const DEFAULT_CHANNEL_CAPACITY = 8;

/**
 * The sending end of a bounded channel to another subtask thread over a `MessagePort`: each
 * message takes a credit, which comes back when the receiver has handled it; `send` waits while
 * `capacity` messages are in flight — the backpressure of the exchange.
 *
 * @example
 * ```ts
 * const { port1, port2 } = new MessageChannel();
 * const sender = new BatchChannelSender(port1, 8);
 * await sender.send({ type: "watermark", watermark: 1000 });
 * ```
 */
export class BatchChannelSender {
  private inFlight = 0;
  /** The most messages ever in flight at once (never above `capacity`). */
  maxInFlight = 0;
  private waiting: { resolve: () => void; reject: (error: unknown) => void } | undefined;
  private cancelled: unknown;

  constructor(
    private readonly port: MessagePort,
    readonly capacity: number = DEFAULT_CHANNEL_CAPACITY,
  ) {
    port.on("message", (handled: number) => {
      this.inFlight -= handled;
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting?.resolve();
    });
  }

  /** Sends `message` once the channel has room for it. */
  async send(message: ChannelMessage): Promise<void> {
    while (this.inFlight >= this.capacity) {
      if (this.cancelled !== undefined) throw this.cancelled;
      await new Promise<void>((resolve, reject) => {
        this.waiting = { resolve, reject };
      });
    }
    if (this.cancelled !== undefined) throw this.cancelled;
    this.inFlight++;
    if (this.inFlight > this.maxInFlight) this.maxInFlight = this.inFlight;
    this.port.postMessage(message);
  }

  /** The attempt ends: a send waiting for room fails instead of waiting for a receiver that is gone. */
  cancel(): void {
    this.cancelled ??= new OnceflowError("JOB_FAILED", "the attempt ended while a batch waited for room");
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(this.cancelled);
  }

  close(): void {
    this.cancel();
    this.port.close();
  }
}

/**
 * The receiving end of a channel from another subtask thread: hands each message to `handle`, one
 * at a time and in order, and returns its credit once handled. `hold()` stops handling (a channel
 * that delivered a checkpoint barrier waits for the snapshot); messages behind it stay queued —
 * at most the sender's capacity, since the sender waits for credits.
 *
 * @example
 * ```ts
 * const receiver = new BatchChannelReceiver(port2, async (message) => console.log(message.type), console.error);
 * ```
 */
export class BatchChannelReceiver {
  private readonly queue: ChannelMessage[] = [];
  private handling = false;
  private held = false;
  private closed = false;
  /** The most messages ever queued here at once. */
  maxQueued = 0;

  constructor(
    private readonly port: MessagePort,
    private readonly handle: (message: ChannelMessage) => void | Promise<void>,
    private readonly onError: (error: unknown) => void,
  ) {
    port.on("message", (message: ChannelMessage) => {
      this.queue.push(message);
      if (this.queue.length > this.maxQueued) this.maxQueued = this.queue.length;
      void this.pump();
    });
  }

  /** Stops handling messages until `release()`. */
  hold(): void {
    this.held = true;
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    void this.pump();
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.port.close();
  }

  private async pump(): Promise<void> {
    if (this.handling) return;
    this.handling = true;
    try {
      while (!this.held && !this.closed && this.queue.length > 0) {
        const message = this.queue.shift()!;
        await this.handle(message);
        if (!this.closed) this.port.postMessage(1);
      }
    } catch (error) {
      // The receiving subtask failed: the attempt fails; nothing more is handled here.
      this.closed = true;
      this.onError(error);
    } finally {
      this.handling = false;
    }
  }
}
