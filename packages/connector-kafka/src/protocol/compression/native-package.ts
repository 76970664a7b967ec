import { createRequire } from "node:module";
import { CodecUnavailableError } from "./compression-codec.js";

/**
 * Loads a codec's package once, at its first use, as CommonJS (the native ones are napi-rs
 * packages: a JavaScript loader that picks the platform's prebuilt binary, an optional dependency
 * installed from the npm registry). A package that is missing or whose binary does not load for
 * this platform throws {@link CodecUnavailableError} at every use, so only topics with that codec
 * fail, with an error that names the package.
 */
export function lazyPackage<T>(codec: string, packageName: string): () => T {
  let loaded: { value: T } | { error: unknown } | undefined;
  return () => {
    if (loaded === undefined) {
      try {
        loaded = { value: createRequire(import.meta.url)(packageName) as T };
      } catch (error) {
        loaded = { error };
      }
    }
    if ("value" in loaded) return loaded.value;
    throw new CodecUnavailableError(codec, packageName, loaded.error);
  };
}
