import { defineConfig } from "tsup";

// ESM and CommonJS builds with their own type declarations (index.d.ts / index.d.cts), so both
// `import` and `require` users get a working, typed package. @onceflow/core is a peer dependency:
// never bundled, one copy in the user's application.
export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
});
