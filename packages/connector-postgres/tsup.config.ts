import { defineConfig } from "tsup";

export default defineConfig([
  {
    entry: ["src/index.ts"],
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
    // The CommonJS build needs import.meta.url (createRequire, which loads pg on first use).
    shims: true,
  },
  {
    // The `onceflow-postgres` executable: ESM only, not part of the importable API.
    entry: { cli: "src/cli/main.ts" },
    format: ["esm"],
    sourcemap: true,
    target: "node20",
    banner: { js: "#!/usr/bin/env node" },
  },
]);
