import { join } from "node:path";
import type { FunctionSnapshotContext } from "../../api/checkpointed-function.js";
import { FileSystemCheckpointStorage } from "../../checkpoint/filesystem-checkpoint-storage.js";
import type { Metrics } from "../../observability/metrics.js";
import { Job, type JobResult } from "../../runtime/job.js";
import { FileSink } from "../../sink/file-sink.js";
import { GeneratorSource } from "../../source/generator-source.js";

/** Options of {@link runSampleJob}. */
export interface SampleJobOptions {
  /** A fresh folder: checkpoints go to `<root>/checkpoints`, output to `<root>/out`. */
  readonly root: string;
  readonly jobId?: string;
  /** Records in total (default 3000), read at `recordsPerSecond` (default 3000). */
  readonly count?: number;
  readonly recordsPerSecond?: number;
  /** The snapshot of this checkpoint fails once: the attempt fails and restarts (default: none). */
  readonly failCheckpoint?: number;
  readonly metrics?: Metrics;
}

/** What {@link runSampleJob} ran. */
export interface SampleJob {
  readonly jobId: string;
  readonly storage: FileSystemCheckpointStorage;
  readonly result: JobResult;
}

/**
 * Runs a small real job for the dashboard's tests and screenshot: a rate-limited generator (4
 * splits, parallelism 2) through a map into an exactly-once `FileSink`, with filesystem checkpoints
 * every 100 ms (with the default retention of 3: the rest of the history comes from the storage's
 * checkpoint history) — and, with `failCheckpoint`, one checkpoint whose snapshot fails, so
 * the job restarts from the checkpoint before it.
 *
 * @example
 * ```ts
 * const { storage, jobId } = await runSampleJob({ root: await mkdtemp(join(tmpdir(), "dash-")), failCheckpoint: 4 });
 * ```
 */
export async function runSampleJob(options: SampleJobOptions): Promise<SampleJob> {
  const jobId = options.jobId ?? "dashboard-sample";
  const storage = new FileSystemCheckpointStorage(join(options.root, "checkpoints"));
  let failed = false;
  const failAt = options.failCheckpoint;
  class FlakyFileSink extends FileSink<string> {
    override async snapshotState(context: FunctionSnapshotContext): Promise<void> {
      if (!failed && context.checkpointId === failAt) {
        failed = true;
        throw new Error(`sample failure in the snapshot of checkpoint ${context.checkpointId}`);
      }
      await super.snapshotState(context);
    }
  }
  const job = new Job({
    jobId,
    parallelism: 2,
    checkpointing: { interval: 100, storage },
    restartStrategy: { type: "fixed-delay", attempts: 3, delay: 200 },
    ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
  });
  job
    .fromSource(
      new GeneratorSource({
        count: options.count ?? 3000,
        splits: 4,
        recordsPerSecond: options.recordsPerSecond ?? 3000,
        batchSize: 50,
        generate: (index) => ({ order: index, amount: index % 97 }),
      }),
      { uid: "orders" },
    )
    .map((order) => `${order.order},${order.amount}\n`, { uid: "format" })
    .sinkTo(() => new FlakyFileSink({ directory: join(options.root, "out"), encoder: (line) => line }), {
      uid: "orders-file",
    });
  const result = await job.execute();
  return { jobId, storage, result };
}
