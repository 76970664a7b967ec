import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This package's tests alone, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/core/vitest.config.ts` from the repository root. The root config runs
// the same files in CI. Unit tests only: no Kafka, no PostgreSQL, so no global setup.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  test: {
    include: ["src/**/*.test.ts"],
    testTimeout: 60_000,
  },
});
