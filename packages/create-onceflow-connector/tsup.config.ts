import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { defineConfig } from "tsup";

// A bin-only package: `npm create onceflow-connector` runs dist/cli.js. Nothing is importable, so
// there is no exports map and no CommonJS build; the templates ship beside dist/ as plain files.
// Self-contained, so that it runs from its own tarball before the onceflow packages are on a
// registry (`npm exec --package=./create-onceflow-connector-<version>.tgz`): the few helpers it uses
// from @onceflow/core (ConfigurationError, formatError) are bundled in, and core's version is
// inlined (src/onceflow-version.ts).
const corePackageJson = createRequire(import.meta.url).resolve("@onceflow/core/package.json");
const { version: coreVersion } = JSON.parse(readFileSync(corePackageJson, "utf8")) as { version: string };

export default defineConfig({
  entry: { cli: "src/cli/main.ts" },
  format: ["esm"],
  sourcemap: true,
  clean: true,
  target: "node20",
  banner: { js: "#!/usr/bin/env node" },
  noExternal: ["@onceflow/core"],
  // One file: nothing of core's optional Prometheus support (prom-client, loaded on demand) is used.
  external: ["prom-client"],
  splitting: false,
  define: { BUILT_ONCEFLOW_VERSION: JSON.stringify(coreVersion) },
});
