import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This package's tests alone, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/core/vitest.config.ts` from the repository root. The root config runs
// the same files in CI: the unit tests (`src`) and the tests kept in `test` (the exploration of the
// checkpoint protocol, the dashboard in a browser). No Kafka, no PostgreSQL, so no global setup.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    // Jobs given no logger write warnings to stderr (defaultLogger); tests assert their logs through
    // loggers of their own, so the default stays quiet here. Tests of the default itself set it.
    env: { ONCEFLOW_LOG_LEVEL: "silent" },
  },
});
