// How long importing packages takes in a fresh process: what a job module's imports cost the main
// thread of a job in worker threads before it can start the threads (start to first checkpoint).
//
//   node bench/import-time.mjs @onceflow/core @onceflow/connector-postgres
//
// Prints one JSON line: `importMs` (the imports, one after the other, timed with performance.now()),
// `sinceStartMs` (from the process's start to the end of the imports) and, for each package whose
// name has a folder in node_modules, how many of its files Node loaded (`files`). Run it several
// times, alternating the builds being compared: a single run says little.
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";

const specifiers = process.argv.slice(2);
if (specifiers.length === 0) {
  process.stderr.write("usage: node bench/import-time.mjs <package> [<package> …]\n");
  process.exit(2);
}
const started = performance.now();
for (const specifier of specifiers) await import(specifier);
const importMs = performance.now() - started;
const sinceStartMs = performance.now();
const require = createRequire(import.meta.url);
const files = {};
for (const name of ["kafkajs", "pg"]) {
  const pattern = new RegExp(`[\\\\/]node_modules[\\\\/]${name}(-[a-z-]+)?[\\\\/]`);
  files[name] = Object.keys(require.cache).filter((file) => pattern.test(file)).length;
}
process.stdout.write(
  `${JSON.stringify({ importMs: Math.round(importMs * 10) / 10, sinceStartMs: Math.round(sinceStartMs), files })}\n`,
);
