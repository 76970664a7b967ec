import { ConfigurationError } from "../../errors/onceflow-error.js";
import type { StreamOperator } from "../operators/stream-operator.js";
import type { OperatorCreationContext, StreamNode } from "../stream-graph.js";
import { CheckpointAlignment } from "./checkpoint-alignment.js";
import { KeyGroupExchangeOperator } from "./key-group-exchange.js";
import { StageGate } from "./stage-gate.js";

/**
 * What the subtasks of one process share when their job has a `keyBy` exchange between them: the
 * checkpoint alignment, and the end of input — a stage behind the exchange ends only when every
 * subtask sending into it has ended, so the last subtask whose own input ends finishes the
 * operators behind the exchange of all of them, stage by stage, and then every subtask's input
 * has ended.
 */
export class LocalExchange {
  readonly alignment: CheckpointAlignment;
  private headsEnded = 0;
  private readonly endedListeners: Array<() => void> = [];

  constructor(
    private readonly participants: number,
    /** Operators behind the exchange, in topological order, with every subtask's in a row. */
    private readonly behindExchange: readonly StreamOperator[],
  ) {
    this.alignment = new CheckpointAlignment(participants);
  }

  /** Calls `listener` once everything behind the exchange has finished. */
  onEnded(listener: () => void): void {
    this.endedListeners.push(listener);
  }

  /** A subtask's operators before the exchange have finished; the last one finishes the rest. */
  async headEnded(): Promise<void> {
    this.headsEnded++;
    if (this.headsEnded < this.participants) return;
    for (const operator of this.behindExchange) {
      await operator.gate!.run(() => operator.finish());
    }
    for (const listener of this.endedListeners) listener();
  }
}

/** The operators of every subtask this process runs, wired, with the exchange when there is one. */
export interface LocalOperators {
  /** By subtask index: its operators in topological order. */
  readonly operatorsOf: ReadonlyMap<number, StreamOperator[]>;
  readonly exchange: LocalExchange | undefined;
}

/**
 * Instantiates the job's graph for each subtask of `subtaskIndexes` and connects it. An operator
 * after `keyBy` (at parallelism above 1) gets its input through a {@link KeyGroupExchangeOperator}
 * in every subtask, connected to that operator in every subtask: input channel `i` comes from
 * subtask `i`. Operators behind an exchange form stages; each subtask's instance of a stage is
 * entered through one {@link StageGate}, since other subtasks' loops call into it.
 */
export function createLocalOperators(
  nodes: readonly StreamNode[],
  subtaskIndexes: readonly number[],
  contextOf: (subtaskIndex: number) => OperatorCreationContext,
  wakeSubtask: (subtaskIndex: number) => void,
): LocalOperators {
  const parallelism = subtaskIndexes.length === 0 ? 1 : contextOf(subtaskIndexes[0]!).parallelism;
  const exchanging = parallelism > 1 && nodes.some((node) => node.exchange !== undefined);
  const stageOf = new Map<number, number>();
  for (const node of nodes) {
    if (node.inputs.length === 0) stageOf.set(node.id, 0);
    else if (exchanging && node.exchange) stageOf.set(node.id, node.id);
    else {
      const stages = new Set(node.inputs.map((input) => stageOf.get(input.id)!));
      stageOf.set(node.id, stages.size === 1 ? [...stages][0]! : node.id);
    }
  }
  const gates = new Map<string, StageGate>();
  const gateOf = (stage: number, subtaskIndex: number): StageGate | undefined => {
    if (!exchanging || stage === 0) return undefined;
    const name = `${stage}:${subtaskIndex}`;
    let gate = gates.get(name);
    if (!gate) {
      gate = new StageGate(() => wakeSubtask(subtaskIndex));
      gates.set(name, gate);
    }
    return gate;
  };
  const byNode = new Map<string, StreamOperator>();
  const operatorOf = (node: StreamNode, subtaskIndex: number): StreamOperator =>
    byNode.get(`${node.id}:${subtaskIndex}`)!;
  const operatorsOf = new Map<number, StreamOperator[]>(subtaskIndexes.map((index) => [index, []]));
  const exchanges = new Map<string, StreamOperator>();
  for (const node of nodes) {
    for (const subtaskIndex of subtaskIndexes) {
      const context = contextOf(subtaskIndex);
      const operator = node.createOperator(context);
      operator.gate = gateOf(stageOf.get(node.id)!, subtaskIndex);
      byNode.set(`${node.id}:${subtaskIndex}`, operator);
      if (exchanging && node.exchange) {
        const [input] = node.inputs;
        const exchange = new KeyGroupExchangeOperator(
          `${node.uid}.exchange`,
          node.uid,
          node.exchange.keySelector,
          context.maxParallelism,
          parallelism,
        );
        exchange.gate = operatorOf(input!, subtaskIndex).gate;
        operatorOf(input!, subtaskIndex).connectTo(exchange);
        exchanges.set(`${node.id}:${subtaskIndex}`, exchange);
        operatorsOf.get(subtaskIndex)!.push(exchange);
      } else {
        for (const input of node.inputs) {
          const crossing = stageOf.get(input.id) !== stageOf.get(node.id);
          operatorOf(input, subtaskIndex).connectTo(operator, crossing ? operator.gate : undefined);
        }
      }
      operatorsOf.get(subtaskIndex)!.push(operator);
    }
    if (exchanging && node.exchange) {
      // Channel i of every receiver is subtask i: connect senders in subtask order.
      for (const sender of subtaskIndexes) {
        const exchange = exchanges.get(`${node.id}:${sender}`)!;
        for (const receiver of subtaskIndexes) {
          const operator = operatorOf(node, receiver);
          exchange.connectTo(operator, operator.gate);
        }
      }
    }
  }
  if (!exchanging) return { operatorsOf, exchange: undefined };
  const behindExchange = nodes.flatMap((node) =>
    stageOf.get(node.id) === 0 ? [] : subtaskIndexes.map((subtaskIndex) => operatorOf(node, subtaskIndex)),
  );
  return { operatorsOf, exchange: new LocalExchange(subtaskIndexes.length, behindExchange) };
}

/**
 * Refuses, at start, a job whose `keyBy` needs an exchange between subtasks that run in other
 * processes (threads have theirs, see `runSubtasksInThreads`) when the job has no `exchange` option
 * for it: without one each subtask would keep its own state per key, silently. Says
 * what to do instead.
 */
export function checkExchangeIsLocal(
  nodes: readonly StreamNode[],
  parallelism: number,
  subtaskIndex: number | undefined,
  crossProcessExchange = false,
): void {
  if (parallelism === 1 || subtaskIndex === undefined || crossProcessExchange) return;
  const keyed = nodes.find((node) => node.exchange !== undefined);
  if (keyed === undefined) return;
  throw new ConfigurationError(
    `keyBy before '${keyed.uid}'`,
    `needs an exchange between the job's ${parallelism} subtasks, so that each key has one state for the whole job, but this process runs subtask ${subtaskIndex} alone (one process per subtask), and no exchange between processes is configured; add the job option \`exchange: kafkaRepartitionExchange({ brokers })\` (from @onceflow/connector-kafka: a Kafka repartition topic carries the records to the process that owns their key), or run every subtask in one process (leave subtaskIndex unset) or in its threads (onceflow run --threads), or, if every key's records come from one source split (a Kafka topic partitioned by this key), say so with reinterpretAsKeyedStream(keySelector) instead of keyBy`,
  );
}
