import { ConfigurationError } from "../errors/onceflow-error.js";
import type { JobOptions } from "./job-options.js";

/**
 * Checks a job's options when it is constructed; throws a `ConfigurationError` naming the option
 * and what to change.
 *
 * @example
 * ```ts
 * validateJobOptions({ jobId: "orders", checkpointing: { interval: 1000 } }, 1);
 * ```
 */
export function validateJobOptions(options: JobOptions, parallelism: number): void {
  if (typeof options.jobId !== "string" || !/^[A-Za-z0-9._-]+$/.test(options.jobId)) {
    throw new ConfigurationError(
      "jobId",
      `must be letters, digits, '.', '_' or '-', got ${JSON.stringify(options.jobId)}`,
    );
  }
  if (!Number.isInteger(parallelism) || parallelism < 1) {
    throw new ConfigurationError("parallelism", `must be a whole number ≥ 1, got ${parallelism}`);
  }
  const { subtaskIndex } = options;
  if (
    subtaskIndex !== undefined &&
    !(Number.isInteger(subtaskIndex) && subtaskIndex >= 0 && subtaskIndex < parallelism)
  ) {
    throw new ConfigurationError(
      "subtaskIndex",
      `must be a whole number from 0 to ${parallelism - 1}, got ${subtaskIndex}`,
    );
  }
  const allow = options.allowNonRestoredState;
  if (allow !== undefined && typeof allow !== "boolean") {
    throw new ConfigurationError(
      "allowNonRestoredState",
      `must be true or false, got ${JSON.stringify(allow)}`,
    );
  }
  const checkpointing = options.checkpointing;
  if (!checkpointing) return;
  const positive = (setting: string, value: number | undefined, minimum: number): void => {
    if (value !== undefined && !(Number.isFinite(value) && value >= minimum)) {
      throw new ConfigurationError(`checkpointing.${setting}`, `must be a number ≥ ${minimum}, got ${value}`);
    }
  };
  if (checkpointing.interval === undefined) {
    throw new ConfigurationError(
      "checkpointing.interval",
      "is required (milliseconds between checkpoints), e.g. 1000",
    );
  }
  positive("interval", checkpointing.interval, 10);
  positive("initialDelay", checkpointing.initialDelay, 0);
  positive("timeout", checkpointing.timeout, 1);
  positive("minPauseBetween", checkpointing.minPauseBetween, 0);
  positive("tolerableFailures", checkpointing.tolerableFailures, 0);
  positive("retained", checkpointing.retained, 1);
  positive("history", checkpointing.history, 1);
  if (checkpointing.history !== undefined && !Number.isSafeInteger(checkpointing.history)) {
    throw new ConfigurationError(
      "checkpointing.history",
      `must be a whole number of entries per scope, got ${checkpointing.history}`,
    );
  }
  if (checkpointing.maxConcurrent !== undefined && checkpointing.maxConcurrent !== 1) {
    throw new ConfigurationError(
      "checkpointing.maxConcurrent",
      `only 1 is supported (one checkpoint in flight, as Flink's default), got ${checkpointing.maxConcurrent}`,
    );
  }
}
