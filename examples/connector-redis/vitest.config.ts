import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// The contract suite drives the sink through every failure case against a real Redis (the testkit
// finds or starts it: ONCEFLOW_REDIS_URL, redis:7 in Docker, or redis-server). Give the cases time
// (a case restarts sinks and waits for commits), and run files one at a time so cases do not
// compete for the server. `root` makes `npx vitest run -c examples/connector-redis/vitest.config.ts`
// work from the repository root too; the root config runs the same file in CI.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
