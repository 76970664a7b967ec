import { defineConfig } from "tsup";

// A bin-only package: `npm create onceflow-connector` runs dist/cli.js. Nothing is importable, so
// there is no exports map and no CommonJS build; the templates ship beside dist/ as plain files.
export default defineConfig({
  entry: { cli: "src/cli/main.ts" },
  format: ["esm"],
  sourcemap: true,
  clean: true,
  target: "node20",
  banner: { js: "#!/usr/bin/env node" },
});
