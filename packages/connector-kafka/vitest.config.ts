import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Dev runs of the Kafka connector's tests (the root config runs them in CI). Tests import the
// package by name; the alias points it at the sources so no build is needed between edits.
const root = fileURLToPath(new URL("../..", import.meta.url));

export default defineConfig({
  root,
  resolve: {
    alias: { "@onceflow/connector-kafka": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
  test: {
    include: ["packages/connector-kafka/src/**/*.test.ts", "test/kafka/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
