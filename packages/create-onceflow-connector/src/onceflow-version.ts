import { createRequire } from "node:module";

// Inlined by the build (tsup's `define` in tsup.config.ts): the generator runs from its own tarball,
// before and besides the npm registry, so at run time it reads no other package.
declare const BUILT_ONCEFLOW_VERSION: string | undefined;

/**
 * The `@onceflow/*` version new connectors depend on (`^` it): the version of `@onceflow/core` the
 * generator was built with — the published onceflow packages share one version. Unbuilt (the
 * generator's own unit tests), the workspace's `@onceflow/core`.
 *
 * @example
 * ```ts
 * builtOnceflowVersion(); // "0.1.0"
 * ```
 */
export function builtOnceflowVersion(): string {
  if (typeof BUILT_ONCEFLOW_VERSION === "string") return BUILT_ONCEFLOW_VERSION;
  const require = createRequire(import.meta.url);
  return (require("@onceflow/core/package.json") as { version: string }).version;
}
