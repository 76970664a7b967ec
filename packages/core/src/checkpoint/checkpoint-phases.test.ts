import { describe, expect, it } from "vitest";
import type { CheckpointedFunction, CheckpointListener } from "../api/checkpointed-function.js";
import { createMemoryMetrics, type MemoryMetrics, MetricNames } from "../observability/metrics.js";
import { prometheusMetrics } from "../observability/prometheus-metrics.js";
import { Job } from "../runtime/job.js";
import type { Sink } from "../sink/sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import type { CompletedCheckpointEntry } from "./checkpoint-history-entries.js";
import type { CheckpointPhases } from "./checkpoint-phases.js";
import type { CompletedCheckpoint } from "./checkpoint-storage.js";
import { MemoryCheckpointStorage } from "./memory-checkpoint-storage.js";

// Each phase of a checkpoint is measured where it happens: a slow step in one place shows up in
// its own phase and in no other, and the phases never add up to more than the checkpoint took.

const PRE_COMMIT_MS = 40;
const STORE_MS = 30;
const COMMIT_MS = 25;
const SLOW_WRITE_MS = 20;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

class SlowStore extends MemoryCheckpointStorage {
  override async store(checkpoint: CompletedCheckpoint): Promise<void> {
    await sleep(STORE_MS);
    await super.store(checkpoint);
  }
}

/**
 * A sink whose pre-commit (its snapshot) and commit (the completion) take a known time; with
 * `slowWrites`, each write waits too, as a sink under backpressure does.
 */
class SlowTransactionsSink implements Sink<number>, CheckpointedFunction, CheckpointListener {
  constructor(private readonly slowWrites = false) {}
  async write(): Promise<void> {
    if (this.slowWrites) await sleep(SLOW_WRITE_MS);
  }
  initializeState(): void {}
  async snapshotState(): Promise<void> {
    await sleep(PRE_COMMIT_MS);
  }
  async notifyCheckpointComplete(): Promise<void> {
    await sleep(COMMIT_MS);
  }
}

async function runJob(options: { slowWrites: boolean; metrics: MemoryMetrics }) {
  const storage = new SlowStore();
  const job = new Job({
    jobId: "phases",
    metrics: options.metrics,
    checkpointing: { interval: 50, storage },
  });
  job
    .fromSource(
      new GeneratorSource<number>({
        count: 300,
        splits: 1,
        generate: (index) => index,
        recordsPerSecond: 1_000,
      }),
      { uid: "numbers" },
    )
    .sinkTo(new SlowTransactionsSink(options.slowWrites), { uid: "out" });
  await job.execute();
  const history = await storage.readHistory("phases");
  return history.filter((entry): entry is CompletedCheckpointEntry => entry.kind === "completed");
}

const snapshotPart = (phases: CheckpointPhases) =>
  phases.barrierMs + phases.alignmentMs + phases.snapshotMs + phases.preCommitMs + phases.storeMs;

describe("the phases of a checkpoint", () => {
  it("put a slow pre-commit, store and commit each in its own phase, adding up to at most the duration", async () => {
    const metrics = createMemoryMetrics();
    const completed = await runJob({ slowWrites: false, metrics });
    expect(completed.length).toBeGreaterThanOrEqual(2);
    for (const { phases, at, triggeredAt } of completed) {
      expect(phases).toBeDefined();
      const p = phases as CheckpointPhases;
      expect(p.preCommitMs).toBeGreaterThanOrEqual(PRE_COMMIT_MS - 1);
      expect(p.storeMs).toBeGreaterThanOrEqual(STORE_MS - 1);
      expect(p.commitMs).toBeGreaterThanOrEqual(COMMIT_MS - 1);
      expect(p.retainMs).toBeGreaterThanOrEqual(0);
      // Nothing of the pre-commit leaks into the snapshot phase; no exchange, no alignment.
      expect(p.snapshotMs).toBeLessThan(PRE_COMMIT_MS / 2);
      expect(p.alignmentMs).toBe(0);
      // Date.now() is whole milliseconds: one of slack.
      expect(snapshotPart(p)).toBeLessThanOrEqual(at - triggeredAt + 1);
    }
    // The metric: seven phases per checkpoint, in seconds, the snapshot part within the duration.
    const observed = metrics.observations(MetricNames.checkpointPhaseDurationSeconds);
    expect(observed).toHaveLength(completed.length * 7);
    const durations = metrics.observations(MetricNames.checkpointDurationSeconds);
    for (const [index, duration] of durations.entries()) {
      const [barrier, alignment, snapshot, preCommit, store] = observed.slice(index * 7, index * 7 + 5);
      expect(preCommit).toBeGreaterThanOrEqual((PRE_COMMIT_MS - 1) / 1000);
      expect(preCommit).toBeLessThan(1);
      expect(barrier! + alignment! + snapshot! + preCommit! + store!).toBeLessThanOrEqual(duration);
    }
  }, 30_000);

  it("count the wait for the batch in hand as the barrier phase", async () => {
    const completed = await runJob({ slowWrites: true, metrics: createMemoryMetrics() });
    const barriers = completed.map((entry) => entry.phases?.barrierMs ?? 0);
    expect(barriers.length).toBeGreaterThan(1);
    // A trigger that fires while a write waits is taken only once the batch in hand is written.
    expect(Math.max(...barriers)).toBeGreaterThanOrEqual(SLOW_WRITE_MS / 4);
    for (const { phases } of completed) expect(phases!.snapshotMs).toBeLessThan(SLOW_WRITE_MS / 2);
  }, 60_000);

  it("are a Prometheus histogram in seconds, labelled by job and phase", async () => {
    const metrics = prometheusMetrics({ defaultMetrics: false });
    const storage = new MemoryCheckpointStorage();
    const job = new Job({ jobId: "phases", metrics, checkpointing: { interval: 50, storage } });
    job
      .fromSource(new GeneratorSource<number>({ count: 10, splits: 1, generate: (index) => index }), {
        uid: "numbers",
      })
      .sinkTo(new SlowTransactionsSink(), { uid: "out" });
    await job.execute();
    const text = await metrics.registry.metrics();
    expect(text).toContain(`# TYPE ${MetricNames.checkpointPhaseDurationSeconds} histogram`);
    for (const phase of ["barrier", "alignment", "snapshot", "pre_commit", "store", "commit", "retain"]) {
      expect(text).toMatch(
        new RegExp(
          `^${MetricNames.checkpointPhaseDurationSeconds}_count\\{job="phases",phase="${phase}"\\} [1-9]`,
          "m",
        ),
      );
    }
  });
});
