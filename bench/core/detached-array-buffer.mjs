// Why the threads' exchange copies batches instead of transferring them: once an isolate has
// detached one ArrayBuffer (a postMessage or structuredClone transfer does), V8 makes every
// optimized typed-array access in it check for detachment. A byte loop over a Buffer — the
// compare.mts `--work` loop — runs between batches that are sent three ways, each in a fresh
// process (its own isolate): not at all, copied, transferred. Prints µs per record and the ratio
// to "not sent".
//
//   node bench/core/detached-array-buffer.mjs [--rounds 3]
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const MODES = ["not sent", "copied", "transferred"];

function loop(value, passes) {
  let hash = 0x811c9dc5;
  for (let pass = 0; pass < passes; pass++) {
    for (let index = 0; index < value.length; index++) {
      hash = Math.imul(hash ^ value[index], 0x01000193) ^ pass;
    }
  }
  return hash;
}

/** µs per record of the loop (120 passes over 100 bytes), a 50 KB batch sent after each 500 records. */
function measure(mode) {
  const value = Buffer.alloc(100, 7);
  let sink = 0;
  const timings = [];
  for (let chunk = 0; chunk < 6; chunk++) {
    const started = process.hrtime.bigint();
    for (let batch = 0; batch < 40; batch++) {
      for (let record = 0; record < 500; record++) {
        value[0] = record & 255;
        sink ^= loop(value, 120);
      }
      const bytes = new Uint8Array(50_000);
      if (mode === "copied") structuredClone(bytes);
      if (mode === "transferred") structuredClone(bytes, { transfer: [bytes.buffer] });
    }
    timings.push(Number(process.hrtime.bigint() - started) / 1e3 / 20_000);
  }
  // The first chunk warms the JIT up.
  const steady = timings.slice(1).sort((a, b) => a - b);
  return { microseconds: steady[Math.floor(steady.length / 2)], sink };
}

const { values: args } = parseArgs({
  options: { rounds: { type: "string", default: "3" }, mode: { type: "string" } },
});
if (args.mode !== undefined) {
  process.stdout.write(JSON.stringify(measure(args.mode)));
} else {
  const perMode = new Map(MODES.map((mode) => [mode, []]));
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const mode of round % 2 === 0 ? MODES : [...MODES].reverse()) {
      const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--mode", mode], {
        encoding: "utf8",
      });
      if (child.status !== 0) throw new Error(`the ${mode} run failed: ${child.stderr}`);
      perMode.get(mode).push(JSON.parse(child.stdout).microseconds);
    }
  }
  const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
  const base = median(perMode.get("not sent"));
  console.log("batches between records   µs per record (median)   × not sent");
  for (const mode of MODES) {
    const value = median(perMode.get(mode));
    console.log(
      `${mode.padEnd(26)} ${value.toFixed(1).padStart(22)}   ${(value / base).toFixed(2).padStart(10)}`,
    );
  }
}
