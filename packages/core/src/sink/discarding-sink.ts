import type { Sink, SinkContext } from "./sink.js";

/**
 * A sink that counts records and drops them — Flink's `DiscardingSink`, for benchmarks and for
 * jobs run only for their side effects. It takes no part in checkpoints.
 *
 * @example
 * ```ts
 * const sink = new DiscardingSink<Order>();
 * await job.fromSource(orders).sinkTo(sink).job.execute();
 * sink.recordCount; // how many records reached the end of the pipeline
 * ```
 */
export class DiscardingSink<IN> implements Sink<IN> {
  readonly name = "DiscardingSink";
  private count = 0;

  /** Records received so far. */
  get recordCount(): number {
    return this.count;
  }

  write(_value: IN, _context: SinkContext): void {
    this.count += 1;
  }

  writeBatch(values: readonly IN[], _context: SinkContext): void {
    this.count += values.length;
  }
}
