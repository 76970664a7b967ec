// The report protocol every candidate of bench/kafka/compare.mts follows (the Java peers too, in
// PeerReport.java): count processed records, print one JSON line when the expected number went
// through, then wait for stdin to close — the driver reads this process's CPU time in between.
// On the way it prints a progress line every PROGRESS_EVERY records (the driver reads the RSS then)
// and, from watchFirstCheckpoint, when the job's first checkpoint completed.
import { threadId } from "node:worker_threads";

const PROGRESS_EVERY = 100_000;

export function createReport() {
  let records = 0;
  let firstAt = 0;
  let lastAt = 0;
  let nextProgress = PROGRESS_EVERY;
  return {
    processed(count = 1) {
      const now = Date.now();
      if (firstAt === 0) firstAt = now;
      lastAt = now;
      records += count;
      if (records >= nextProgress) {
        nextProgress += PROGRESS_EVERY;
        // Threads count on their own: the driver adds up the latest count of each reporter.
        process.stdout.write(`${JSON.stringify({ event: "progress", reporter: threadId, records })}\n`);
      }
    },
    records: () => records,
    /** What this counter saw, to send to another thread: `{ records, firstAt, lastAt }`. */
    snapshot: () => ({ records, firstAt, lastAt }),
    /** Adds another counter's snapshot (a thread's): the report covers both. */
    absorb(other) {
      if (other.records === 0) return;
      firstAt = firstAt === 0 ? other.firstAt : Math.min(firstAt, other.firstAt);
      lastAt = Math.max(lastAt, other.lastAt);
      records += other.records;
    },
    async doneAndWait() {
      process.stdout.write(`${JSON.stringify({ event: "done", records, firstAt, lastAt })}\n`);
      await new Promise((resolve) => {
        process.stdin.on("end", resolve);
        process.stdin.on("close", resolve);
        process.stdin.resume();
      });
    },
  };
}

/**
 * Prints `{"event":"checkpoint","at":<ms>}` once the job's first checkpoint completed: `at` is the
 * completion time the job recorded (its status's `lastCompletedCheckpoint.completedAt`), so the
 * polling interval does not add to it. `status` is `job.status` or `threads.status`.
 */
export function watchFirstCheckpoint(status) {
  const timer = setInterval(() => {
    const completed = status().lastCompletedCheckpoint;
    if (completed === undefined) return;
    clearInterval(timer);
    process.stdout.write(`${JSON.stringify({ event: "checkpoint", at: completed.completedAt })}\n`);
  }, 20);
  timer.unref();
}
