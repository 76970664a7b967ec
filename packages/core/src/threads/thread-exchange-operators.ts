import type { MessagePort } from "node:worker_threads";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { KeyGroupExchangeOperator } from "../runtime/exchange/key-group-exchange.js";
import type { RecordSerializer } from "../runtime/exchange/record-serializer.js";
import { StageGate } from "../runtime/exchange/stage-gate.js";
import { type RecordBatch, StreamOperator } from "../runtime/operators/stream-operator.js";
import type { OperatorCreationContext, StreamNode } from "../runtime/stream-graph.js";
import type { SubtaskOperators } from "../runtime/subtask-host.js";
import { BatchChannelReceiver, BatchChannelSender, type ChannelMessage } from "./batch-channel.js";
import { decodeRecordBatch, encodeRecordBatch } from "./batch-encoding.js";
import { ThreadExchange } from "./thread-exchange.js";

/**
 * The ports of one subtask thread's exchange channels, by the other subtask's index: `to[s]` sends
 * to subtask `s`, `from[s]` receives from it (undefined at the thread's own index).
 *
 * @example
 * ```ts
 * const { port1, port2 } = new MessageChannel(); // port1 in subtask 0's `to[1]`, port2 in subtask 1's `from[0]`
 * ```
 */
export interface ExchangePorts {
  readonly to: ReadonlyArray<MessagePort | undefined>;
  readonly from: ReadonlyArray<MessagePort | undefined>;
  /** Messages in flight per channel at most (see `BatchChannelSender`). */
  readonly capacity: number;
}

/**
 * Refuses, with a `CONFIGURATION` error saying what to do, a job whose exchange the threads cannot
 * run: in threads a job has one `keyBy` exchange, and everything after it follows it (no second
 * `keyBy`, no `union` of the keyed stream with a stream before it). Returns whether the job needs
 * the exchange (a `keyBy` at parallelism above 1).
 *
 * @example
 * ```ts
 * if (checkThreadExchange(nodes, 2)) console.log("the subtask threads exchange records by key group");
 * ```
 */
export function checkThreadExchange(nodes: readonly StreamNode[], parallelism: number): boolean {
  const exchanges = nodes.filter((node) => node.exchange !== undefined);
  if (parallelism === 1 || exchanges.length === 0) return false;
  const what = (node: StreamNode): string => `'${node.uid}'`;
  if (exchanges.length > 1) {
    throw new ConfigurationError(
      `keyBy before ${exchanges.map(what).join(" and ")}`,
      "in threads a job has one keyBy exchange; run it in one process (without --threads), or key the later operator by the same key with reinterpretAsKeyedStream",
    );
  }
  const behind = behindExchange(nodes, exchanges[0]!);
  for (const node of nodes) {
    if (behind.has(node.id) || node.inputs.every((input) => !behind.has(input.id))) continue;
    throw new ConfigurationError(
      `'${node.uid}'`,
      "joins the keyed stream with a stream from before the keyBy; in threads everything after the keyBy follows it alone: run the job in one process (without --threads)",
    );
  }
  return true;
}

/** The nodes behind `exchange`: it and every node all of whose inputs are behind it. */
function behindExchange(nodes: readonly StreamNode[], exchange: StreamNode): Set<number> {
  const behind = new Set<number>([exchange.id]);
  for (const node of nodes) {
    if (node.inputs.length > 0 && node.inputs.every((input) => behind.has(input.id))) behind.add(node.id);
  }
  return behind;
}

/**
 * The operators of one subtask in a worker thread, wired to the other subtasks' threads through
 * the exchange: the `keyBy`'s {@link KeyGroupExchangeOperator} sends the part of each batch that
 * another subtask owns over the channel to that subtask's thread, and its own part straight to its
 * keyed stage; input `s` of the keyed operator is subtask `s`'s part, as in one process.
 */
export function createThreadOperators(
  nodes: readonly StreamNode[],
  context: OperatorCreationContext,
  wake: () => void,
  ports: ExchangePorts,
  onError: (error: unknown) => void,
): SubtaskOperators {
  const { subtaskIndex, parallelism } = context;
  const exchangeNode = nodes.find((node) => node.exchange !== undefined)!;
  const serializer = exchangeNode.exchange!.serializer;
  const behind = behindExchange(nodes, exchangeNode);
  const gate = new StageGate(wake);
  const byNode = new Map<number, StreamOperator>();
  const operators: StreamOperator[] = [];
  const senders = new Map<number, BatchChannelSender>();
  const receivers = new Map<number, BatchChannelReceiver>();
  const receiverOperators = new Map<number, ChannelReceiverOperator>();
  for (const node of nodes) {
    const operator = node.createOperator(context);
    if (behind.has(node.id)) operator.gate = gate;
    byNode.set(node.id, operator);
    if (node === exchangeNode) {
      const exchange = new KeyGroupExchangeOperator(
        `${node.uid}.exchange`,
        node.uid,
        node.exchange!.keySelector,
        context.maxParallelism,
        parallelism,
      );
      byNode.get(node.inputs[0]!.id)!.connectTo(exchange);
      operators.push(exchange);
      // Output s of the exchange and input s of the keyed operator are subtask s.
      for (let other = 0; other < parallelism; other++) {
        if (other === subtaskIndex) {
          exchange.connectTo(operator, gate);
          continue;
        }
        const sender = new BatchChannelSender(ports.to[other]!, ports.capacity);
        senders.set(other, sender);
        exchange.connectTo(new ChannelSenderOperator(`${node.uid}.to-${other}`, sender, serializer));
        const receiver = new ChannelReceiverOperator(`${node.uid}.from-${other}`);
        receiver.connectTo(operator, gate);
        receiverOperators.set(other, receiver);
      }
    } else {
      for (const input of node.inputs) byNode.get(input.id)!.connectTo(operator);
    }
    operators.push(operator);
  }
  const threadExchange = new ThreadExchange(
    subtaskIndex,
    senders,
    receivers,
    nodes.filter((node) => behind.has(node.id)).map((node) => byNode.get(node.id)!),
    onError,
  );
  for (const [other, receiverOperator] of receiverOperators) {
    const handle = (message: ChannelMessage): void | Promise<void> => {
      switch (message.type) {
        case "batch":
          return receiverOperator.deliverBatch(decodeRecordBatch(message.bytes, serializer));
        case "watermark":
          return receiverOperator.deliverWatermark(message.watermark);
        case "idle":
          return receiverOperator.deliverIdleness(message.idle);
        case "barrier":
          return threadExchange.barrierArrived(other, message.checkpointId);
        case "end":
          return threadExchange.endArrived(other);
      }
    };
    receivers.set(other, new BatchChannelReceiver(ports.from[other]!, handle, onError));
  }
  return {
    operatorsOf: new Map([[subtaskIndex, operators]]),
    exchange: threadExchange,
  };
}

/** Closes every channel of a subtask thread's exchange (after its operators closed). */
export function closeChannels(ports: ExchangePorts): void {
  for (const port of [...ports.to, ...ports.from]) port?.close();
}

/** Stands for another subtask's keyed stage in this thread: what reaches it goes over the channel. */
class ChannelSenderOperator extends StreamOperator {
  constructor(
    uid: string,
    private readonly sender: BatchChannelSender,
    private readonly serializer: RecordSerializer<unknown> | undefined,
  ) {
    super(uid);
  }

  processBatch(batch: RecordBatch): Promise<void> {
    // Copied, not transferred: see `ChannelMessage`.
    return this.sender.send({ type: "batch", bytes: encodeRecordBatch(batch, this.serializer) });
  }

  protected override async onWatermark(watermark: number): Promise<void> {
    await this.sender.send({ type: "watermark", watermark });
  }

  protected override async emitIdleness(idle: boolean): Promise<void> {
    await this.sender.send({ type: "idle", idle });
  }
}

/** Stands for another subtask's exchange in this thread: hands on what its channel delivers. */
class ChannelReceiverOperator extends StreamOperator {
  processBatch(batch: RecordBatch): void | Promise<void> {
    return this.emit(batch);
  }

  deliverBatch(batch: RecordBatch): void | Promise<void> {
    return this.emit(batch);
  }

  deliverWatermark(watermark: number): Promise<void> {
    return this.emitWatermark(watermark);
  }

  deliverIdleness(idle: boolean): Promise<void> {
    return this.emitIdleness(idle);
  }
}
