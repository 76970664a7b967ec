import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// This package's unit tests alone, from any folder: `npx vitest run` here, or
// `npx vitest run -c packages/create-onceflow-connector/vitest.config.ts` from the repository root.
// The end-to-end check (generate, install against the packed tarballs, build, test) is
// test/release/generated-connector.test.ts at the root. No services needed.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  test: {
    include: ["src/**/*.test.ts"],
    testTimeout: 60_000,
  },
});
