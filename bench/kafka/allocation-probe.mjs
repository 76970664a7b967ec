// Which code allocates the large buffers of a onceflow Kafka job (memory): preload it
// into a candidate and, at exit, it writes the call sites of every Buffer of 128 KiB or more made by
// Buffer.alloc, allocUnsafe, allocUnsafeSlow or concat (glibc's threshold for mmap: what the
// allocator and the collector pay for), by bytes, to the file in ALLOCATION_PROBE_FILE. Buffers
// made in native code (a socket's reads) are not seen. Through compare.mts, which passes the
// environment on to the candidates (the driver, a tsx process, is left out by its arguments):
//   ALLOCATION_PROBE_FILE=/tmp/allocations.txt NODE_OPTIONS="--import ./bench/kafka/allocation-probe.mjs" \
//     npx tsx bench/kafka/compare.mts --records 2000000 --rounds 1 --candidates onceflow-eos
// It wraps Buffer's functions and takes a stack per large buffer: a diagnostic, never for a
// measured run. Worker threads load the preload too and write their own section.
import { writeFileSync } from "node:fs";
import { threadId } from "node:worker_threads";

const file = process.env.ALLOCATION_PROBE_FILE;
const LARGE_BYTES = 128 * 1024;

if (file !== undefined && !process.argv.some((argument) => argument.endsWith("compare.mts"))) {
  /** "how call site" → how many buffers, how many bytes. */
  const sites = new Map();
  let inConcat = false;
  const count = (how, bytes) => {
    if (bytes < LARGE_BYTES || inConcat) return;
    const frames = (new Error().stack ?? "").split("\n").slice(3, 7);
    const site = `${how} ${frames.map((frame) => frame.trim()).join(" | ")}`;
    const entry = sites.get(site) ?? { buffers: 0, bytes: 0 };
    entry.buffers++;
    entry.bytes += bytes;
    sites.set(site, entry);
  };
  for (const how of ["alloc", "allocUnsafe", "allocUnsafeSlow"]) {
    const original = Buffer[how];
    Buffer[how] = function (size, ...rest) {
      count(how, size);
      return original.call(this, size, ...rest);
    };
  }
  const concat = Buffer.concat;
  Buffer.concat = function (list, totalLength) {
    // Its own allocUnsafe is counted as the concat.
    inConcat = true;
    let result;
    try {
      result = concat.call(this, list, totalLength);
    } finally {
      inConcat = false;
    }
    count("concat", result.length);
    return result;
  };
  process.on("exit", () => {
    const lines = [...sites.entries()]
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .map(([site, { buffers, bytes }]) => `${buffers}\t${(bytes / 1048576).toFixed(0)} MiB\t${site}`);
    writeFileSync(
      file,
      `${process.argv[1]} (pid ${process.pid}, thread ${threadId})\n${lines.join("\n")}\n`,
      {
        flag: "a",
      },
    );
  });
}
