import { defineConfig } from "vitest/config";

// Unit tests of @onceflow/core alone: no external services.
export default defineConfig({
  test: { include: ["src/**/*.test.ts"], testTimeout: 60_000 },
});
