import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/**
 * Loads a connector package once per explored process. Connectors keep process-wide registries (the
 * sink ids or transactional-id prefixes in use) that a killed process — here a frozen promise, not a
 * dead Node process — would never release; a module instance of its own per process is what a
 * process of its own would have.
 *
 * @example
 * ```ts
 * const { PostgresSink } = await connectorOfProcess<typeof import("@onceflow/connector-postgres")>("@onceflow/connector-postgres", "p3");
 * ```
 */
export async function connectorOfProcess<M>(packageName: string, processName: string): Promise<M> {
  const entry = createRequire(import.meta.url)
    .resolve(packageName)
    .replace(/\.cjs$/, ".js");
  return (await import(`${pathToFileURL(entry).href}?process=${processName}`)) as M;
}
