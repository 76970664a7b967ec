import { defineConfig } from "vitest/config";

// The contract suite drives the sink through every failure case against the real system: give the
// cases time (a case restarts sinks and waits for commits), and run files one at a time so cases do
// not compete for the system.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
