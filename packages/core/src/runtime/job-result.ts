// What a job's run hands back when it ends.

/**
 * How a run ended.
 *
 * @example
 * ```ts
 * const result = await job.execute();
 * console.log(result.endedBy, result.lastCheckpointId, result.restarts);
 * ```
 */
export interface JobResult {
  readonly jobId: string;
  /** `end-of-input` when bounded sources finished, `stop` after `stop()` or a signal. */
  readonly endedBy: "end-of-input" | "stop";
  /** The final checkpoint's id. */
  readonly lastCheckpointId: number;
  /** The checkpoint the first attempt restored, if any. */
  readonly restoredCheckpointId: number | undefined;
  /**
   * True when the first attempt restored the final checkpoint of a run that had ended and the input
   * ended again: bounded sources resumed at their end, so this run read nothing they had not read.
   */
  readonly resumedAtEndOfInput: boolean;
  readonly restarts: number;
}
