import type { Metrics } from "./metrics.js";

/**
 * One {@link Metrics} that reports every observation to both registries (the job's own and one
 * attached later, such as the CLI's Prometheus registry).
 *
 * @example
 * ```ts
 * const metrics = teeMetrics(createMemoryMetrics(), prometheusMetrics());
 * ```
 */
export function teeMetrics(first: Metrics, second: Metrics): Metrics {
  return {
    counter(name, help) {
      const a = first.counter(name, help);
      const b = second.counter(name, help);
      return {
        inc(value, labels) {
          a.inc(value, labels);
          b.inc(value, labels);
        },
      };
    },
    gauge(name, help) {
      const a = first.gauge(name, help);
      const b = second.gauge(name, help);
      return {
        set(value, labels) {
          a.set(value, labels);
          b.set(value, labels);
        },
      };
    },
    histogram(name, help) {
      const a = first.histogram(name, help);
      const b = second.histogram(name, help);
      return {
        observe(value, labels) {
          a.observe(value, labels);
          b.observe(value, labels);
        },
      };
    },
    onCollect(name, refresh) {
      const stops = [first.onCollect?.(name, refresh), second.onCollect?.(name, refresh)];
      return () => {
        for (const stop of stops) stop?.();
      };
    },
  };
}
