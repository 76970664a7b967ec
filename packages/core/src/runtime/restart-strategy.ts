/**
 * What to do after a failure — Flink's restart strategies. The default is exponential-delay
 * (1 s initial, 1 min max, ×1.5), as in Flink with checkpointing on.
 *
 * @example
 * ```ts
 * const restartStrategy: RestartStrategy = { type: "fixed-delay", attempts: 3, delay: 500 };
 * ```
 */
export type RestartStrategy =
  | {
      readonly type: "exponential-delay";
      readonly initialDelay?: number;
      readonly maxDelay?: number;
      readonly multiplier?: number;
      /** After this long without failure the delay starts again from `initialDelay` (default 1 h). */
      readonly resetAfter?: number;
      /** Give up after this many restarts in a row (default: never). */
      readonly maxAttempts?: number;
    }
  | { readonly type: "fixed-delay"; readonly attempts: number; readonly delay: number }
  | {
      readonly type: "failure-rate";
      /** Give up when more than this many failures happen within `interval`. */
      readonly maxFailures: number;
      readonly interval: number;
      readonly delay: number;
    }
  | { readonly type: "none" };
