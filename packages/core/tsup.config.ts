import { defineConfig } from "tsup";

export default defineConfig([
  {
    entry: ["src/index.ts"],
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
  },
  {
    // The CLI (and the demo's job process) are ESM executables, not part of the importable API.
    entry: { cli: "src/cli/main.ts", "demo-worker": "src/demo/demo-worker.ts" },
    format: ["esm"],
    sourcemap: true,
    target: "node20",
    banner: { js: "#!/usr/bin/env node" },
  },
]);
