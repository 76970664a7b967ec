/**
 * One level of a {@link Logger}: pino's calling convention, `(object, message)` or `(message)`.
 */
export interface LogFunction {
  (object: Record<string, unknown>, message?: string): void;
  (message: string): void;
}

/**
 * The logger onceflow writes to: any pino logger fits, and so does a small adapter of your own.
 * Nothing logs unless you pass one.
 *
 * @example
 * ```ts
 * import pino from "pino";
 * const job = new Job({ jobId: "orders", logger: pino() });
 * ```
 */
export interface Logger {
  debug: LogFunction;
  info: LogFunction;
  warn: LogFunction;
  error: LogFunction;
  /** Returns a logger that adds `bindings` to every line (pino's `child`). */
  child(bindings: Record<string, unknown>): Logger;
}

const ignore: LogFunction = () => {};

/**
 * A logger that drops everything: the default, so the library never writes to the console unasked.
 *
 * @example
 * ```ts
 * const logger: Logger = silentLogger;
 * ```
 */
export const silentLogger: Logger = {
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
  child: () => silentLogger,
};

/** One line captured by {@link createMemoryLogger}. */
export interface LogEntry {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  fields: Record<string, unknown>;
}

/**
 * A logger that keeps every line in memory, for tests that assert a warning was given.
 *
 * @example
 * ```ts
 * const logger = createMemoryLogger();
 * logger.warn({ checkpointId: 3 }, "transaction near its timeout");
 * logger.entries[0]?.message; // "transaction near its timeout"
 * ```
 */
export function createMemoryLogger(): Logger & { readonly entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const make = (bindings: Record<string, unknown>): Logger & { entries: LogEntry[] } => {
    const at =
      (level: LogEntry["level"]): LogFunction =>
      (first: Record<string, unknown> | string, message?: string) => {
        if (typeof first === "string") entries.push({ level, message: first, fields: { ...bindings } });
        else entries.push({ level, message: message ?? "", fields: { ...bindings, ...first } });
      };
    return {
      entries,
      debug: at("debug"),
      info: at("info"),
      warn: at("warn"),
      error: at("error"),
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  return make({});
}

/**
 * A logger that writes one line per entry to a stream (standard error by default), for CLIs and demos.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "demo", logger: createConsoleLogger({ level: "info" }) });
 * ```
 */
export function createConsoleLogger(
  options: { level?: LogEntry["level"]; stream?: NodeJS.WritableStream } = {},
): Logger {
  const order = ["debug", "info", "warn", "error"] as const;
  const minimum = order.indexOf(options.level ?? "info");
  const stream = options.stream ?? process.stderr;
  const make = (bindings: Record<string, unknown>): Logger => {
    const at =
      (level: LogEntry["level"]): LogFunction =>
      (first: Record<string, unknown> | string, message?: string) => {
        if (order.indexOf(level) < minimum) return;
        const fields = typeof first === "string" ? bindings : { ...bindings, ...first };
        const text = typeof first === "string" ? first : (message ?? "");
        const extra = Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields)}` : "";
        stream.write(`${new Date().toISOString()} ${level.toUpperCase()} ${text}${extra}\n`);
      };
    return {
      debug: at("debug"),
      info: at("info"),
      warn: at("warn"),
      error: at("error"),
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  return make({});
}
