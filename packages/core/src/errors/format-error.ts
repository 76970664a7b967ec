import { isOnceflowError } from "./onceflow-error.js";

/**
 * One line for a failure: `error [CODE]: message`, with the causes' messages when they add something.
 *
 * @example
 * ```ts
 * formatError(new ConfigurationError("--job", "choose one")); // "error [CONFIGURATION]: --job: choose one"
 * ```
 */
export function formatError(error: unknown): string {
  if (isOnceflowError(error)) {
    let line = `error [${error.code}]: ${error.message}`;
    let cause: unknown = error.cause;
    for (let depth = 0; cause instanceof Error && depth < 3; depth += 1) {
      if (!line.includes(cause.message)) line += `\n  caused by: ${cause.message}`;
      cause = cause.cause;
    }
    return line;
  }
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return `error [${typeof code === "string" ? code : "UNEXPECTED"}]: ${message}`;
}
