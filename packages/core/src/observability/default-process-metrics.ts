import type { collectDefaultMetrics as CollectDefaultMetrics, Registry } from "prom-client";

/**
 * prom-client's default gauges whose names end in `_total`, which Prometheus keeps for counters
 * (`promtool check metrics` rejects them; prom-client keeps them for compatibility). Their
 * per-type families (`nodejs_active_handles{type}` …) carry the same numbers: `sum()` them.
 */
const GAUGES_NAMED_LIKE_COUNTERS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/**
 * Registers prom-client's default metrics of the process (`process_*`, `nodejs_*`) in `registry`,
 * unless it has them already, without the gauges named like counters. `client` is prom-client
 * itself, passed in so that this module never loads it (it is an optional peer dependency).
 *
 * @example
 * ```ts
 * import * as client from "prom-client";
 * registerDefaultMetrics(client, registry);
 * ```
 */
export function registerDefaultMetrics(
  client: { collectDefaultMetrics: typeof CollectDefaultMetrics },
  registry: Registry,
): void {
  if (registry.getSingleMetric("process_cpu_user_seconds_total") !== undefined) return;
  try {
    client.collectDefaultMetrics({ register: registry });
  } catch {
    // Some of them were registered by hand already: keep those.
  }
  for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
}
