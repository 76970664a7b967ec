import { ConfigurationError } from "../errors/onceflow-error.js";
import type { CrossProcessExchange } from "./exchange/cross-process-exchange.js";
import { crossProcessNodes } from "./exchange/cross-process-graph.js";
import type { StreamNode } from "./stream-graph.js";

/**
 * What decides how one process runs a job's graph: its shape, whether it runs one subtask alone,
 * the exchange between processes and whether checkpointing is on.
 *
 * @example
 * ```ts
 * const shape: ExecutionShape = { jobId: "orders", parallelism: 3, maxParallelism: 128, subtaskIndex: 1, exchange, checkpointing: true };
 * ```
 */
export interface ExecutionShape {
  readonly jobId: string;
  readonly parallelism: number;
  readonly maxParallelism: number;
  /** Set when this process runs that one subtask alone. */
  readonly subtaskIndex: number | undefined;
  readonly exchange: CrossProcessExchange | undefined;
  readonly checkpointing: boolean;
}

/**
 * The graph as this process runs it: the job's own, or — one process per subtask with a `keyBy` —
 * with the exchange between processes cut in. Refuses an exchange without checkpointing
 * (`CONFIGURATION`): it writes exactly once, with transactions committed by checkpoints.
 *
 * @example
 * ```ts
 * const nodes = executionNodesOf(graph.nodes, { jobId, parallelism, maxParallelism, subtaskIndex, exchange, checkpointing: true });
 * ```
 */
export function executionNodesOf(nodes: readonly StreamNode[], shape: ExecutionShape): readonly StreamNode[] {
  const { exchange } = shape;
  // At parallelism 1 too: a rescale to 1 must still commit and read what is in the exchange.
  if (exchange === undefined || shape.subtaskIndex === undefined) return nodes;
  if (!nodes.some((node) => node.exchange !== undefined)) return nodes;
  if (!shape.checkpointing) {
    throw new ConfigurationError(
      "exchange",
      `(${exchange.name}) writes exactly once, with transactions committed by checkpoints; turn checkpointing on, e.g. \`checkpointing: { interval: 1000 }\``,
    );
  }
  return crossProcessNodes(nodes, exchange, {
    jobId: shape.jobId,
    maxParallelism: shape.maxParallelism,
    parallelism: shape.parallelism,
  });
}
