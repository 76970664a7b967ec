import { ConfigurationError } from "../errors/onceflow-error.js";
import type { RestartStrategy } from "./restart-strategy.js";

/** The default: Flink's exponential-delay strategy with its defaults. */
export const DEFAULT_RESTART_STRATEGY: RestartStrategy = { type: "exponential-delay" };

/**
 * Decides, failure by failure, whether to restart and after how long, following a
 * {@link RestartStrategy}.
 */
export class RestartController {
  private restarts = 0;
  private lastFailureAt: number | undefined;
  private readonly failureTimes: number[] = [];

  constructor(private readonly strategy: RestartStrategy) {
    validateRestartStrategy(strategy);
  }

  /** The delay before the next attempt, or `undefined` to give up. */
  onFailure(now: number): number | undefined {
    const strategy = this.strategy;
    switch (strategy.type) {
      case "none":
        return undefined;
      case "fixed-delay":
        if (this.restarts >= strategy.attempts) return undefined;
        this.restarts++;
        return strategy.delay;
      case "failure-rate": {
        this.failureTimes.push(now);
        while (this.failureTimes.length > 0 && now - this.failureTimes[0]! > strategy.interval)
          this.failureTimes.shift();
        if (this.failureTimes.length > strategy.maxFailures) return undefined;
        return strategy.delay;
      }
      case "exponential-delay": {
        const initial = strategy.initialDelay ?? 1000;
        const max = strategy.maxDelay ?? 60_000;
        const multiplier = strategy.multiplier ?? 1.5;
        const resetAfter = strategy.resetAfter ?? 3_600_000;
        if (this.lastFailureAt !== undefined && now - this.lastFailureAt >= resetAfter) this.restarts = 0;
        this.lastFailureAt = now;
        if (strategy.maxAttempts !== undefined && this.restarts >= strategy.maxAttempts) return undefined;
        const delay = Math.min(initial * multiplier ** this.restarts, max);
        this.restarts++;
        return delay;
      }
    }
  }
}

function validateRestartStrategy(strategy: RestartStrategy): void {
  const nonNegative = (setting: string, value: number | undefined): void => {
    if (value !== undefined && !(Number.isFinite(value) && value >= 0)) {
      throw new ConfigurationError(`restartStrategy.${setting}`, `must be a number ≥ 0, got ${value}`);
    }
  };
  switch (strategy.type) {
    case "none":
      return;
    case "fixed-delay":
      nonNegative("attempts", strategy.attempts);
      nonNegative("delay", strategy.delay);
      return;
    case "failure-rate":
      nonNegative("maxFailures", strategy.maxFailures);
      nonNegative("interval", strategy.interval);
      nonNegative("delay", strategy.delay);
      return;
    case "exponential-delay":
      nonNegative("initialDelay", strategy.initialDelay);
      nonNegative("maxDelay", strategy.maxDelay);
      nonNegative("resetAfter", strategy.resetAfter);
      nonNegative("maxAttempts", strategy.maxAttempts);
      if (strategy.multiplier !== undefined && !(strategy.multiplier >= 1)) {
        throw new ConfigurationError("restartStrategy.multiplier", `must be ≥ 1, got ${strategy.multiplier}`);
      }
      return;
    default:
      throw new ConfigurationError(
        "restartStrategy.type",
        `unknown type '${(strategy as { type: string }).type}'; use exponential-delay, fixed-delay, failure-rate or none`,
      );
  }
}
