import type { Logger } from "../observability/logger.js";

/**
 * Stops a job with a final checkpoint on SIGTERM and SIGINT (the job's `handleSignals` option);
 * returns the function that removes the handlers again.
 *
 * @example
 * ```ts
 * const removeSignalHandlers = installStopSignalHandlers(logger, () => job.stop());
 * // … when the run ends:
 * removeSignalHandlers();
 * ```
 */
export function installStopSignalHandlers(logger: Logger, stop: () => void): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, "stopping with a final checkpoint");
    stop();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return () => {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  };
}
