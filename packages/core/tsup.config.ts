import { defineConfig } from "tsup";

export default defineConfig([
  {
    // `prometheus` is the `@onceflow/core/prometheus` subpath (it imports the optional prom-client).
    entry: { index: "src/index.ts", prometheus: "src/prometheus.ts" },
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
    // `runSubtasksInThreads` finds dist/subtask-thread.js from import.meta.url, in the CommonJS build too.
    shims: true,
  },
  {
    // The CLI (and the demo's job process, and the thread of one subtask) are ESM executables, not
    // part of the importable API.
    entry: {
      cli: "src/cli/main.ts",
      "demo-worker": "src/demo/demo-worker.ts",
      "subtask-thread": "src/threads/subtask-thread.ts",
    },
    format: ["esm"],
    sourcemap: true,
    target: "node20",
    banner: { js: "#!/usr/bin/env node" },
  },
]);
