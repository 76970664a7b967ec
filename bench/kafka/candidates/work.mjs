// The per-record CPU work of compare.mts's `--work <n>` (BENCH_WORK in the environment), the same
// in every onceflow candidate: n passes of FNV-1a over the record's value, a plain arithmetic loop
// that allocates nothing, whose 32-bit result replaces the value's last 4 bytes. The result goes
// into the output, so it cannot be optimised away, and the record keeps its size and its leading id
// (the output check still reads it). With n = 0 (the default) the value passes through unchanged.
// It makes the job CPU-bound in node while the broker has little to do, so parallelism can be
// measured where the broker is not the limit. (Rounds of createHash("sha256") were tried first:
// each allocates a Hash object, and a third of the time went to scavenges, whose helper threads
// compete with the subtask threads for the cores — the work's own cost, not the job's.)

/** The passes from BENCH_WORK (0 when unset). */
export function workRounds() {
  const rounds = Number(process.env.BENCH_WORK ?? "0");
  if (!Number.isInteger(rounds) || rounds < 0) {
    throw new Error(`BENCH_WORK must be an integer ≥ 0, not ${process.env.BENCH_WORK}`);
  }
  return rounds;
}

/** `value` after `rounds` passes of work (a new buffer of the same length), or `value` itself at 0. */
export function work(value, rounds) {
  if (rounds === 0 || value.length < 4) return value;
  let hash = 0x811c9dc5;
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < value.length; i++) hash = Math.imul(hash ^ value[i], 0x01000193) ^ round;
  }
  const out = Buffer.allocUnsafe(value.length);
  value.copy(out, 0, 0, value.length - 4);
  out.writeUInt32BE(hash >>> 0, value.length - 4);
  return out;
}
