// The reader of bench/kafka/latency.mts's PostgreSQL candidates: its own connection (not the sink's),
// polling for rows past the last seq it saw every POLL_MS, noting for each row now minus its
// sent_at — when the row became visible to another session, i.e. its checkpoint committed.
//   node postgres-latency-reader.mjs <postgresql://…> <table>
// Same protocol as latency-reader.mjs: {"event":"ready"}, {"event":"first"}, `cutoff <ms>` on
// stdin, and {"event":"latencies", …} when stdin closes. `seen` is count(*) of the table at the
// end, `polled` the rows the polling saw (equal, unless a row became visible below a seq already
// passed).
import { createInterface } from "node:readline";
import pg from "pg";

const POLL_MS = 5;
const [connection, table] = process.argv.slice(2);
const client = new pg.Client({ connectionString: connection });
await client.connect();
const latencies = [];
let polled = 0;
let last = 0;
let cutoff = Number.POSITIVE_INFINITY;
let stopping = false;
process.stdout.write(`${JSON.stringify({ event: "ready" })}\n`);
createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, value] = line.split(" ");
  if (command === "cutoff") cutoff = Number(value);
});
process.stdin.on("end", () => {
  stopping = true;
});
while (!stopping) {
  const { rows } = await client.query({
    text: `SELECT seq, sent_at FROM ${table} WHERE seq > $1 ORDER BY seq`,
    values: [last],
    rowMode: "array",
  });
  const now = Date.now();
  if (polled === 0 && rows.length > 0) process.stdout.write(`${JSON.stringify({ event: "first" })}\n`);
  for (const [seq, sentAt] of rows) {
    const sent = Number(sentAt);
    if (sent >= cutoff) latencies.push(now - sent);
    last = Number(seq);
  }
  polled += rows.length;
  if (rows.length === 0) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
}
function percentile(sorted, p) {
  return sorted.length === 0
    ? null
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const { rows } = await client.query(`SELECT count(*)::bigint AS n FROM ${table}`);
await client.end();
const sorted = Float64Array.from(latencies).sort();
const summary = {
  event: "latencies",
  seen: Number(rows[0].n),
  polled,
  measured: sorted.length,
  p50: percentile(sorted, 50),
  p90: percentile(sorted, 90),
  p99: percentile(sorted, 99),
  max: sorted.length === 0 ? null : sorted[sorted.length - 1],
};
process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
