import { ConfigurationError } from "../../errors/onceflow-error.js";
import type { Sink } from "../../sink/sink.js";
import type { StreamNode } from "../stream-graph.js";
import type { CrossProcessExchange } from "./cross-process-exchange.js";
import { ChannelSource, ExchangeReceiverOperator } from "./exchange-receiver.js";
import { ExchangeSenderOperator } from "./exchange-sender.js";

/** The uid of the sending side of the exchange before keyed operator `keyedUid`. */
export function exchangeSenderUid(keyedUid: string): string {
  return `${keyedUid}.exchange-out`;
}

/** The uid of the keyed side's source of the exchange before keyed operator `keyedUid`. */
export function exchangeReceiverUid(keyedUid: string): string {
  return `${keyedUid}.exchange-in`;
}

/**
 * The job's graph as one process per subtask runs it with an exchange between processes: each
 * `keyBy` is cut in two — the operators before it end in a sink into the exchange (tagged with key
 * groups), and the keyed operator reads from a source over the key groups its subtask owns. The two
 * halves run in the same subtask and checkpoint together, but nothing passes between them in
 * memory: every record takes the exchange, to whichever process owns its key group.
 */
export function crossProcessNodes(
  nodes: readonly StreamNode[],
  exchange: CrossProcessExchange,
  job: { jobId: string; maxParallelism: number; parallelism: number },
): StreamNode[] {
  let nextId = Math.max(0, ...nodes.map((node) => node.id));
  const uids = new Set(nodes.map((node) => node.uid));
  const result: StreamNode[] = [];
  for (const node of nodes) {
    const { exchange: keyed, ...rest } = node;
    if (keyed === undefined) {
      result.push(node);
      continue;
    }
    const [input] = node.inputs;
    const senderUid = exchangeSenderUid(node.uid);
    const receiverUid = exchangeReceiverUid(node.uid);
    for (const uid of [senderUid, receiverUid]) {
      if (uids.has(uid)) {
        throw new ConfigurationError(
          `uid '${uid}'`,
          `is the exchange's before '${node.uid}'; give that operator another uid`,
        );
      }
    }
    const channel = exchange.channel({
      jobId: job.jobId,
      keyedUid: node.uid,
      maxParallelism: job.maxParallelism,
      parallelism: job.parallelism,
      ...(keyed.serializer === undefined ? {} : { serializer: keyed.serializer }),
    });
    const source = new ChannelSource(channel, job.maxParallelism);
    const sender: StreamNode = {
      id: ++nextId,
      uid: senderUid,
      kind: "sink",
      inputs: [input!],
      createOperator: (context) =>
        new ExchangeSenderOperator(
          senderUid,
          channel.createSink(context) as Sink<unknown>,
          node.uid,
          keyed.keySelector,
          context,
        ),
    };
    const receiver: StreamNode = {
      id: ++nextId,
      uid: receiverUid,
      kind: "source",
      inputs: [],
      source,
      createOperator: () => new ExchangeReceiverOperator(receiverUid, source),
    };
    result.push(sender, receiver, { ...rest, inputs: [receiver] });
  }
  return result;
}
