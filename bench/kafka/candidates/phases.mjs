// Where the checkpoints of a candidate's job spent their time: the p50 and p99 of each phase of
// `onceflow_checkpoint_phase_duration_seconds` and of the checkpoint duration, in ms, read from a
// createMemoryMetrics() registry. Printed by the onceflow candidates (to stderr, or as an event).
import { MetricNames } from "@onceflow/core";
import { watchFirstCheckpoint } from "./report.mjs";

const PHASES = ["barrier", "alignment", "snapshot", "pre_commit", "store", "commit", "retain"];

function percentile(values, p) {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** `{ checkpoints, duration: { p50, p99 }, phases: { barrier: { p50, p99 }, … } }` in ms. */
export function phaseSummary(metrics) {
  // Observed in phase order, seven per checkpoint (see CheckpointPhaseMetrics).
  const observed = metrics.observations(MetricNames.checkpointPhaseDurationSeconds);
  const byPhase = new Map(PHASES.map((phase) => [phase, []]));
  for (let index = 0; index + PHASES.length <= observed.length; index += PHASES.length) {
    for (const [offset, phase] of PHASES.entries()) byPhase.get(phase).push(observed[index + offset] * 1000);
  }
  const durations = metrics.observations(MetricNames.checkpointDurationSeconds).map((s) => s * 1000);
  const round = (ms) => Math.round(ms * 10) / 10;
  const summary = (values) => ({ p50: round(percentile(values, 50)), p99: round(percentile(values, 99)) });
  return {
    checkpoints: durations.length,
    duration: summary(durations),
    phases: Object.fromEntries(PHASES.map((phase) => [phase, summary(byPhase.get(phase))])),
  };
}

/** One line: `checkpoint duration p50/p99 … ms; barrier p50/p99 …, …`. */
export function formatPhaseSummary(summary) {
  const pair = ({ p50, p99 }) => `${p50}/${p99}`;
  const phases = Object.entries(summary.phases)
    .map(([phase, values]) => `${phase} ${pair(values)}`)
    .join(", ");
  return `${summary.checkpoints} checkpoints, duration p50/p99 ${pair(summary.duration)} ms; phases p50/p99 ms: ${phases}`;
}

/**
 * Runs a latency candidate's `job` until the driver closes stdin: prints {"event":"checkpoint"}
 * after the first checkpoint (report.mjs), then at stdin's end {"event":"phases", …} (the
 * checkpoints' phases from `metrics`), stops the job, runs `afterStop` (closing a storage, say) and
 * exits.
 */
export function runUntilStdinEnds(job, metrics, afterStop = async () => {}) {
  watchFirstCheckpoint(() => job.status());
  const done = job.execute();
  process.stdin.resume();
  process.stdin.on("end", async () => {
    process.stdout.write(`${JSON.stringify({ event: "phases", ...phaseSummary(metrics) })}\n`);
    job.stop();
    await done.catch(() => undefined);
    await afterStop();
    process.exit(0);
  });
}
