import { defineConfig } from "vitest/config";

// Development runs of this package alone: `npx vitest run -c packages/connector-postgres/vitest.config.ts`.
export default defineConfig({
  test: {
    include: [
      "packages/connector-postgres/src/**/*.test.ts",
      "packages/connector-postgres/test/**/*.test.ts",
      "test/postgres/**/*.test.ts",
    ],
    testTimeout: 180_000,
    hookTimeout: 60_000,
    // Two cores and one shared server: files run one after another.
    fileParallelism: false,
  },
});
