import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This connector's tests, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/connector-postgres/vitest.config.ts` from the repository root (the
// root config runs the same files in CI). They are the package's own tests (`src`, `test`) and its
// integration tests kept at the root (`test/postgres`, the PostgresSink contract). The include
// paths are relative to `root`, the repository, so they hold whichever folder vitest starts in.
// The testkit's global setup (from its sources, as in the root config) provides PostgreSQL
// (ONCEFLOW_POSTGRES_URL, or one it starts) and Kafka (ONCEFLOW_KAFKA_BROKERS, or one it starts),
// which the Kafka → PostgreSQL crash tests read from.
process.env.ONCEFLOW_TESTKIT_SERVICES ??= "all";
const root = fileURLToPath(new URL("../..", import.meta.url));

export default defineConfig({
  root,
  test: {
    include: [
      "packages/connector-postgres/src/**/*.test.ts",
      "packages/connector-postgres/test/**/*.test.ts",
      "test/postgres/**/*.test.ts",
      "test/contract/postgres-sink.contract.test.ts",
      "test/explore/postgres-exploration.test.ts",
    ],
    globalSetup: [fileURLToPath(new URL("../testkit/src/vitest/global-setup.ts", import.meta.url))],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    // Two cores and one shared server: files run one after another.
    fileParallelism: false,
  },
});
