import { ConfigurationError } from "../errors/onceflow-error.js";
import type { Source, SourceSplit } from "../source/source.js";
import type { RecordSerializer } from "./exchange/record-serializer.js";
import type { StreamOperator } from "./operators/stream-operator.js";

/** Where an operator instance is created: which subtask, and how many this process runs. */
export interface OperatorCreationContext {
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly subtasksInProcess: number;
  /** The job's number of key groups. */
  readonly maxParallelism: number;
}

/** One operator of the job's graph, before it is instantiated per subtask. */
export interface StreamNode {
  readonly id: number;
  readonly uid: string;
  readonly kind: "source" | "map" | "filter" | "flatMap" | "union" | "process" | "sink";
  readonly inputs: readonly StreamNode[];
  readonly source?: Source<unknown, SourceSplit>;
  /**
   * Set on an operator after `keyBy`: its input is repartitioned by key group (the exchange), so
   * each record reaches the subtask that owns its key.
   */
  readonly exchange?: {
    readonly keySelector: (value: unknown) => unknown;
    /** How records cross between threads and processes (structured clones when absent). */
    readonly serializer?: RecordSerializer<unknown>;
  };
  readonly createOperator: (context: OperatorCreationContext) => StreamOperator;
}

/** The job's operators in the order they were declared, which is a topological order. */
export class StreamGraph {
  private readonly nodeList: StreamNode[] = [];
  private readonly uids = new Set<string>();

  get nodes(): readonly StreamNode[] {
    return this.nodeList;
  }

  add(
    kind: StreamNode["kind"],
    inputs: readonly StreamNode[],
    uid: string | undefined,
    createOperator: (uid: string, context: OperatorCreationContext) => StreamOperator,
    source?: Source<unknown, SourceSplit>,
    exchange?: StreamNode["exchange"],
  ): StreamNode {
    const id = this.nodeList.length + 1;
    const resolvedUid = uid ?? `${kind}-${id}`;
    if (this.uids.has(resolvedUid)) {
      throw new ConfigurationError(
        `uid '${resolvedUid}'`,
        "is used by two operators; every uid must be unique",
      );
    }
    if (resolvedUid.includes("/")) {
      throw new ConfigurationError(`uid '${resolvedUid}'`, "must not contain '/'");
    }
    this.uids.add(resolvedUid);
    const node: StreamNode = {
      id,
      uid: resolvedUid,
      kind,
      inputs,
      ...(source ? { source } : {}),
      ...(exchange ? { exchange } : {}),
      createOperator: (context) => createOperator(resolvedUid, context),
    };
    this.nodeList.push(node);
    return node;
  }
}

/**
 * Turns what the user passed (an instance or a factory) into one instance for a subtask. An
 * instance can serve only when this process runs a single subtask: two subtasks sharing one object
 * would share its transaction and state.
 */
export function instantiatePerSubtask<T extends object>(
  valueOrFactory: T | ((context: { subtaskIndex: number; parallelism: number }) => T),
  what: string,
  context: OperatorCreationContext,
): T {
  if (typeof valueOrFactory === "function") {
    return (valueOrFactory as (context: { subtaskIndex: number; parallelism: number }) => T)({
      subtaskIndex: context.subtaskIndex,
      parallelism: context.parallelism,
    });
  }
  if (context.subtasksInProcess > 1) {
    throw new ConfigurationError(
      what,
      `this process runs ${context.subtasksInProcess} subtasks, which cannot share one instance; pass a factory instead, e.g. \`() => new MySink(options)\``,
    );
  }
  return valueOrFactory;
}
