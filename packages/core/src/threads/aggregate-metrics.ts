import { ConfigurationError } from "../errors/onceflow-error.js";

/**
 * The Prometheus text of several threads' registries as one: what `/metrics` serves when a job's
 * subtasks run in threads.
 *
 * @example
 * ```ts
 * const { text, contentType } = await aggregateMetrics(await Promise.all(threads.map(askForJson)));
 * ```
 */
export interface AggregatedMetrics {
  readonly text: string;
  readonly contentType: string;
}

type PromClient = typeof import("prom-client");

let promClient: Promise<PromClient> | undefined;

/**
 * Merges the `registry.getMetricsAsJSON()` of every thread with prom-client's
 * `AggregatorRegistry.aggregate` (its cluster-mode aggregation). Each thread labels all its
 * series with its `subtask` (the job-level ones too, such as the last completed checkpoint: each
 * thread checkpoints on its own), so no two threads' series are summed into one. prom-client is an
 * optional peer dependency: without it, a `CONFIGURATION` error says how to install it.
 *
 * @example
 * ```ts
 * const { text } = await aggregateMetrics([await registryA.getMetricsAsJSON(), await registryB.getMetricsAsJSON()]);
 * ```
 */
export async function aggregateMetrics(perThread: readonly unknown[][]): Promise<AggregatedMetrics> {
  const { AggregatorRegistry } = await loadPromClient();
  const registry = AggregatorRegistry.aggregate(
    perThread as Parameters<typeof AggregatorRegistry.aggregate>[0],
  );
  return { text: await registry.metrics(), contentType: registry.contentType };
}

/**
 * Loads prom-client once, turning its absence into a `CONFIGURATION` error (call it before the
 * threads start, so that a missing prom-client fails at once).
 *
 * @example
 * ```ts
 * await loadPromClient();
 * ```
 */
export function loadPromClient(): Promise<PromClient> {
  promClient ??= import("prom-client").catch((cause: unknown) => {
    promClient = undefined;
    throw new ConfigurationError(
      "metrics",
      "aggregating the threads' metrics needs prom-client, an optional peer dependency of @onceflow/core: npm install prom-client",
      { cause },
    );
  });
  return promClient;
}
