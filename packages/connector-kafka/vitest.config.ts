import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This connector's tests, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/connector-kafka/vitest.config.ts` from the repository root (the root
// config runs the same files in CI). They are the package's own unit tests and its integration
// tests kept at the root (`test/kafka`, the KafkaSink contract, the KafkaSink exploration). Tests import the package by name;
// the alias points it at the sources so no build is needed between edits (the crash tests' child
// processes use the built package: `npm run build -w @onceflow/connector-kafka`). The testkit's
// global setup (from its sources, as in the root config) provides the broker: ONCEFLOW_KAFKA_BROKERS,
// or one it starts (ONCEFLOW_KAFKA_VERSION=4 for Kafka 4.x).
process.env.ONCEFLOW_TESTKIT_SERVICES ??= "kafka";
const root = fileURLToPath(new URL("../..", import.meta.url));

export default defineConfig({
  root,
  resolve: {
    alias: { "@onceflow/connector-kafka": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
  test: {
    include: [
      "packages/connector-kafka/src/**/*.test.ts",
      "packages/connector-kafka/test/**/*.test.ts",
      "test/kafka/**/*.test.ts",
      "test/contract/kafka-sink.contract.test.ts",
      "test/explore/kafka-exploration.test.ts",
    ],
    globalSetup: [fileURLToPath(new URL("../testkit/src/vitest/global-setup.ts", import.meta.url))],
    testTimeout: 180_000,
    hookTimeout: 240_000,
    teardownTimeout: 60_000,
    // Two cores and one broker: files run one after another.
    fileParallelism: false,
  },
});
