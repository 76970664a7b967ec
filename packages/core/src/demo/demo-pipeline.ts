import { filesystem } from "../checkpoint/filesystem-checkpoint-storage.js";
import type { Logger } from "../observability/logger.js";
import { Job } from "../runtime/job.js";
import { FileSink } from "../sink/file-sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { countAggregate } from "../window/aggregate-function.js";
import { TumblingEventTimeWindows } from "../window/window-assigners.js";

/** One reading of the demo's input: sensor `key` at event time `timestamp`. */
export interface DemoReading {
  readonly key: string;
  readonly timestamp: number;
}

/** One line of the demo's output: how many readings a sensor had in a one-second window. */
export interface DemoWindowCount {
  readonly key: string;
  readonly windowStart: number;
  readonly count: number;
}

export const DEMO_SENSORS = 16;
export const DEMO_SPLITS = 4;
const EPOCH = Date.UTC(2026, 0, 1);

/** Reading `index` of the demo input. Deterministic, so the checker can recompute the truth. */
export function demoReading(index: number): DemoReading {
  // Split s reads the indices i ≡ s (mod 4), and every sensor reads on every split: its count per
  // window is right only with one state per sensor for the whole job (keyBy's exchange).
  // Event time advances 1 ms per 4 readings: a one-second window holds 4,000 readings.
  const tick = Math.floor(index / DEMO_SPLITS);
  return { key: `sensor-${tick % DEMO_SENSORS}`, timestamp: EPOCH + tick };
}

/** Builds the demo job: generator → keyed one-second tumbling count → exactly-once FileSink. */
export function createDemoJob(options: {
  directory: string;
  records: number;
  recordsPerSecond: number;
  logger: Logger;
}): Job {
  const job = new Job({
    jobId: "demo",
    parallelism: 2,
    checkpointing: { interval: 1000, storage: filesystem(`${options.directory}/checkpoints`) },
    restartStrategy: { type: "none" },
    logger: options.logger,
    handleSignals: true,
  });
  job
    .fromSource(
      new GeneratorSource({
        count: options.records,
        splits: DEMO_SPLITS,
        generate: demoReading,
        timestampOf: (index) => demoReading(index).timestamp,
        recordsPerSecond: options.recordsPerSecond,
      }),
      { uid: "readings" },
    )
    .keyBy((reading) => reading.key)
    .window(TumblingEventTimeWindows.of(1000))
    .aggregate(
      countAggregate<DemoReading>(),
      (key, window, count): DemoWindowCount => ({ key, windowStart: window.start, count }),
      { uid: "count-per-second" },
    )
    .sinkTo(() => new FileSink<DemoWindowCount>({ directory: `${options.directory}/output` }), {
      uid: "files",
    });
  return job;
}
