import { defineConfig } from "vitest/config";

// The whole suite, as CI runs it (`npm test` builds every package first). One Kafka broker and one
// PostgreSQL are started for the run by the testkit's global setup (from its sources, so a testkit
// change needs no rebuild) and shared by every test file; tests that kill or restart a service start
// their own. ONCEFLOW_TESTKIT_SERVICES=none skips them for unit-only runs.
export default defineConfig({
  test: {
    include: [
      "packages/*/src/**/*.test.ts",
      "packages/*/test/**/*.test.ts",
      "test/**/*.test.ts",
      "examples/**/*.test.ts",
    ],
    exclude: ["**/node_modules/**", "**/dist/**"],
    globalSetup: ["packages/testkit/src/vitest/global-setup.ts"],
    // Two cores: two files at a time, next to the broker's JVM and PostgreSQL.
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 60_000,
    // The first run fetches the Kafka jars from Maven Central and starts JVMs: hooks may take minutes.
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    // Jobs given no logger write warnings to stderr (defaultLogger); tests assert their logs through
    // loggers of their own, so the default stays quiet here. Tests of the default itself set it.
    env: { ONCEFLOW_LOG_LEVEL: "silent" },
  },
});
