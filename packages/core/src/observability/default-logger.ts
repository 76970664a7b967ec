import { createConsoleLogger, isLogLevel, type LogFormat, type LogFunction, type Logger } from "./logger.js";

// One default per process, shared by the ESM and CommonJS builds of this package and by a CLI
// bundled apart from the library (a module-level variable would exist once per copy).
const DEFAULT_LOGGER_KEY = Symbol.for("onceflow.defaultLogger");

interface DefaultLoggerHolder {
  [DEFAULT_LOGGER_KEY]?: Logger;
}

const holder = globalThis as DefaultLoggerHolder;

/**
 * The process's default logger as the environment sets it: `ONCEFLOW_LOG_LEVEL` (`debug`, `info`,
 * `warn` — the default —, `error`, `silent`) and `ONCEFLOW_LOG_FORMAT` (`text` on a terminal,
 * `json` otherwise), written to standard error.
 */
function loggerFromEnvironment(): Logger {
  const level = process.env.ONCEFLOW_LOG_LEVEL;
  const format = process.env.ONCEFLOW_LOG_FORMAT;
  return createConsoleLogger({
    level: isLogLevel(level) ? level : "warn",
    format: format === "json" || format === "text" ? format : defaultLogFormat(),
  });
}

/**
 * `text` when standard error is a terminal (a person reads it), `json` otherwise (a collector does).
 *
 * @example
 * ```ts
 * createConsoleLogger({ format: defaultLogFormat() });
 * ```
 */
export function defaultLogFormat(): LogFormat {
  return process.stderr.isTTY === true ? "text" : "json";
}

function current(): Logger {
  holder[DEFAULT_LOGGER_KEY] ??= loggerFromEnvironment();
  return holder[DEFAULT_LOGGER_KEY];
}

/**
 * Replaces the logger that jobs without a `logger` option write to, for the whole process, and
 * returns the one it replaced. `onceflow run` sets it from `--log-level` and `--log-format`; pass
 * `silentLogger` to silence even warnings.
 *
 * @example
 * ```ts
 * const previous = setDefaultLogger(createConsoleLogger({ level: "info" }));
 * // … later
 * setDefaultLogger(previous);
 * ```
 */
export function setDefaultLogger(logger: Logger): Logger {
  const previous = current();
  holder[DEFAULT_LOGGER_KEY] = logger;
  return previous;
}

function delegating(bindings: Record<string, unknown> | undefined): Logger {
  const at =
    (level: "debug" | "info" | "warn" | "error"): LogFunction =>
    (first: Record<string, unknown> | string, message?: string) => {
      const target = bindings === undefined ? current() : current().child(bindings);
      if (typeof first === "string") target[level](first);
      else target[level](first, message);
    };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (more) => delegating({ ...bindings, ...more }),
  };
}

/**
 * The logger of a job that was given none: whatever {@link setDefaultLogger} set, looked up at
 * each line (so a job built before the CLI set it still writes there). Unless set, it writes
 * warnings and errors to standard error — what an operator must know: a failed attempt and its
 * restart, a fenced (superseded) process, a transaction near its timeout, a restore that produces
 * output again, data kept for a later run — and never `info` or `debug`. `ONCEFLOW_LOG_LEVEL` and
 * `ONCEFLOW_LOG_FORMAT` change that default without code.
 *
 * @example
 * ```ts
 * defaultLogger.warn({ checkpointId: 3 }, "written to standard error unless setDefaultLogger said otherwise");
 * ```
 */
export const defaultLogger: Logger = delegating(undefined);
