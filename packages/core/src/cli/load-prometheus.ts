import { ConfigurationError } from "../errors/onceflow-error.js";
import type { PrometheusMetrics } from "../observability/prometheus-metrics.js";

/** The module of `@onceflow/core/prometheus`, as the CLI loads it. */
export type PrometheusModule = typeof import("../observability/prometheus-metrics.js");

/**
 * Loads the prom-client adapter for `--metrics-port`, only when asked for: prom-client is an
 * optional peer dependency, and without it the rest of the CLI must still work. A missing
 * prom-client becomes a `CONFIGURATION` error that says how to install it.
 *
 * @example
 * ```ts
 * const metrics = await loadPrometheusMetrics();
 * const text = await metrics.registry.metrics();
 * ```
 */
export async function loadPrometheusMetrics(
  importModule: () => Promise<PrometheusModule> = () => import("../observability/prometheus-metrics.js"),
  options: { defaultMetrics?: boolean } = {},
): Promise<PrometheusMetrics> {
  let module: PrometheusModule;
  try {
    module = await importModule();
  } catch (cause) {
    const code = (cause as { code?: unknown } | null)?.code;
    const message = cause instanceof Error ? cause.message : String(cause);
    if ((code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") && message.includes("prom-client")) {
      throw new ConfigurationError(
        "--metrics-port",
        "serving metrics needs prom-client, an optional peer dependency of @onceflow/core: npm install prom-client",
        { cause },
      );
    }
    throw cause;
  }
  return module.prometheusMetrics({ defaultMetrics: options.defaultMetrics ?? true });
}
