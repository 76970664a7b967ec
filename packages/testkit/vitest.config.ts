import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This package's tests alone, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/testkit/vitest.config.ts` from the repository root. The root config
// runs the same files in CI. The global setup (from the sources, as in the root config) provides
// one Kafka broker and one PostgreSQL — ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL when set, or
// ones it starts; ONCEFLOW_TESTKIT_SERVICES=none skips them for the unit tests.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  test: {
    include: ["src/**/*.test.ts"],
    globalSetup: ["src/vitest/global-setup.ts"],
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 60_000,
    // The first run fetches the Kafka jars and starts JVMs: hooks may take minutes.
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
  },
});
