import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Dev runs of the Kafka connector's tests (the root config runs them in CI). Tests import the
// package by name; the alias points it at the sources so no build is needed between edits (the
// crash tests' child processes use the built package: `npm run build -w @onceflow/connector-kafka`).
// The testkit's global setup provides the broker: ONCEFLOW_KAFKA_BROKERS, or one it starts
// (ONCEFLOW_KAFKA_VERSION=4 for Kafka 4.x).
process.env.ONCEFLOW_TESTKIT_SERVICES ??= "kafka";
const root = fileURLToPath(new URL("../..", import.meta.url));

export default defineConfig({
  root,
  resolve: {
    alias: { "@onceflow/connector-kafka": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
  test: {
    include: ["packages/connector-kafka/src/**/*.test.ts", "test/kafka/**/*.test.ts"],
    globalSetup: ["@onceflow/testkit/global-setup"],
    testTimeout: 180_000,
    hookTimeout: 240_000,
    fileParallelism: false,
  },
});
