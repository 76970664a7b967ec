import { defineConfig } from "tsup";

export default defineConfig([
  {
    // The library and its two vitest entry points: `@onceflow/testkit`, `@onceflow/testkit/vitest`
    // (helpers used inside tests) and `@onceflow/testkit/global-setup` (vitest's globalSetup file).
    entry: {
      index: "src/index.ts",
      vitest: "src/vitest/index.ts",
      "global-setup": "src/vitest/global-setup.ts",
    },
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
  },
  {
    // The CLI is an ESM executable only; it is not part of the importable API.
    entry: { cli: "src/cli/main.ts" },
    format: ["esm"],
    sourcemap: true,
    target: "node20",
    banner: { js: "#!/usr/bin/env node" },
  },
]);
