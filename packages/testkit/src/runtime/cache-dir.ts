import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";

/**
 * The user-level folder where the testkit caches downloads (Kafka jars): `$ONCEFLOW_CACHE_DIR`, else
 * `$XDG_CACHE_HOME/onceflow`, else `~/.cache/onceflow`.
 *
 * @example
 * ```ts
 * onceflowCacheDir(); // "/home/me/.cache/onceflow"
 * ```
 */
export function onceflowCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.ONCEFLOW_CACHE_DIR;
  if (explicit) return explicit;
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && isAbsolute(xdg) ? xdg : join(homedir(), ".cache");
  return join(base, "onceflow");
}
