// The report protocol every candidate of bench/kafka/compare.mts follows (the Java peers too, in
// PeerReport.java): count processed records, print one JSON line when the expected number went
// through, then wait for stdin to close — the driver reads this process's CPU time in between.
export function createReport() {
  let records = 0;
  let firstAt = 0;
  let lastAt = 0;
  return {
    processed(count = 1) {
      const now = Date.now();
      if (firstAt === 0) firstAt = now;
      lastAt = now;
      records += count;
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
