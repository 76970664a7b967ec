/**
 * One level of a {@link Logger}: pino's calling convention, `(object, message)` or `(message)`.
 */
export interface LogFunction {
  (object: Record<string, unknown>, message?: string): void;
  (message: string): void;
}

/**
 * The logger onceflow writes to: any pino logger fits, and so does a small adapter of your own.
 * Without one, a job writes its warnings and errors to standard error (see `defaultLogger`).
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
 * A logger that drops everything: pass it as a job's `logger` (or to `setDefaultLogger`) to silence even warnings.
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

/** Keys whose values are never logged (compared lower-case, without `_`, `-` and `.`). */
const SECRET_KEY_PARTS = [
  "password",
  "passwd",
  "passphrase",
  "secret",
  "token",
  "authorization",
  "apikey",
  "privatekey",
  "credential",
  "cookie",
];
const SECRET_KEYS = new Set(["pwd", "pass", "auth"]);
/** Keys whose value is redacted when it is an object (settings that hold certificates, keys, mechanisms). */
const SECRET_SETTINGS_KEYS = new Set(["sasl", "ssl", "tls"]);
/** Fields that hold an error even when what was thrown is not an `Error`. */
const ERROR_KEYS = new Set(["err", "error", "cause"]);
const REDACTED = "[redacted]";
const MAX_DEPTH = 6;
const MAX_CAUSE_DEPTH = 5;
const MAX_ENTRIES = 50;
const MAX_STRING_LENGTH = 4_096;
const MAX_FIELD_LENGTH = 8_192;

function isSecretKey(key: string, value: unknown): boolean {
  const normalized = key.toLowerCase().replace(/[_.-]/g, "");
  if (SECRET_SETTINGS_KEYS.has(normalized)) return value !== null && typeof value === "object";
  return SECRET_KEYS.has(normalized) || SECRET_KEY_PARTS.some((part) => normalized.includes(part));
}

/**
 * Removes passwords from text: the password of a URL (`postgres://user:pass@host` becomes
 * `postgres://user:[redacted]@host`) and `password=…` pairs of a connection string.
 */
function redactText(text: string): string {
  const redacted = text
    .replace(/(\/\/[^\s:/?#@]*:)[^\s/]*@/g, `$1${REDACTED}@`)
    .replace(/\b(password|passwd|pwd)(\s*=\s*)('[^']*'|"[^"]*"|[^\s;&,]+)/gi, `$1$2${REDACTED}`);
  return redacted.length > MAX_STRING_LENGTH
    ? `${redacted.slice(0, MAX_STRING_LENGTH)}… (${redacted.length - MAX_STRING_LENGTH} more characters)`
    : redacted;
}

function isPlainObject(value: object): boolean {
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function classNameOf(value: object): string {
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === "string" && name !== "" ? name : "Object";
}

/** What was thrown, as name, message, code, stack and cause (and an AggregateError's errors). */
function describeError(error: object, seen: Set<object>, causeDepth: number): unknown {
  if (seen.has(error)) return "[Circular]";
  seen.add(error);
  const source = error as {
    name?: unknown;
    message?: unknown;
    code?: unknown;
    stack?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  const described: Record<string, unknown> = {};
  if (typeof source.name === "string") described.name = source.name;
  else if (error instanceof Error) described.name = classNameOf(error);
  if (source.message !== undefined) described.message = redactText(String(source.message));
  if (typeof source.code === "string" || typeof source.code === "number") described.code = source.code;
  if (typeof source.stack === "string") described.stack = redactText(source.stack);
  if (source.cause !== undefined) {
    described.cause =
      causeDepth >= MAX_CAUSE_DEPTH
        ? "[further causes left out]"
        : describeErrorValue(source.cause, seen, causeDepth + 1);
  }
  if (Array.isArray(source.errors)) {
    described.errors = source.errors
      .slice(0, MAX_ENTRIES)
      .map((inner: unknown) => describeErrorValue(inner, seen, causeDepth + 1));
  }
  seen.delete(error);
  return described;
}

/** A thrown value: an `Error` (or error-like object) is described, anything else made safe. */
function describeErrorValue(value: unknown, seen: Set<object>, causeDepth: number): unknown {
  if (value !== null && typeof value === "object" && (value instanceof Error || "message" in value)) {
    return describeError(value, seen, causeDepth);
  }
  return toLogSafe(value, seen, 0);
}

/** A value as it may appear in a log line: JSON-safe, without secrets, bounded in size. */
function toLogSafe(value: unknown, seen: Set<object>, depth: number): unknown {
  switch (typeof value) {
    case "string":
      return redactText(value);
    case "number":
    case "boolean":
    case "undefined":
      return value;
    case "bigint":
      return value.toString();
    case "symbol":
      return value.toString();
    case "function":
      return `[Function ${value.name || "anonymous"}]`;
  }
  if (value === null) return null;
  const object = value as object;
  if (object instanceof Error) return describeError(object, seen, 0);
  if (object instanceof Date) return Number.isNaN(object.getTime()) ? "Invalid Date" : object.toISOString();
  if (ArrayBuffer.isView(object)) return `[${classNameOf(object)} ${object.byteLength} bytes]`;
  if (object instanceof Map || object instanceof Set) return `[${classNameOf(object)} of ${object.size}]`;
  if (seen.has(object)) return "[Circular]";
  const isArray = Array.isArray(object);
  // Instances of classes (clients, pools, sockets, streams …) are never dumped: they hold
  // connection settings and keys, and are large. Only data (plain objects, arrays) is written.
  if (!isArray && !isPlainObject(object)) return `[${classNameOf(object)}]`;
  if (depth >= MAX_DEPTH) return isArray ? `[Array of ${object.length}]` : "[Object]";
  seen.add(object);
  let result: unknown;
  if (isArray) {
    const items = object.slice(0, MAX_ENTRIES).map((item: unknown) => toLogSafe(item, seen, depth + 1));
    if (object.length > MAX_ENTRIES) items.push(`… ${object.length - MAX_ENTRIES} more`);
    result = items;
  } else {
    result = safeEntries(object as Record<string, unknown>, seen, depth);
  }
  seen.delete(object);
  return result;
}

function safeEntries(
  object: Record<string, unknown>,
  seen: Set<object>,
  depth: number,
): Record<string, unknown> {
  const keys = Object.keys(object);
  const safe: Record<string, unknown> = {};
  for (const key of keys.slice(0, MAX_ENTRIES)) {
    const value = object[key];
    if (isSecretKey(key, value)) safe[key] = value === undefined || value === null ? value : REDACTED;
    else if (ERROR_KEYS.has(key)) safe[key] = describeErrorValue(value, seen, 0);
    else safe[key] = toLogSafe(value, seen, depth + 1);
  }
  if (keys.length > MAX_ENTRIES) safe["…"] = `${keys.length - MAX_ENTRIES} more keys`;
  return safe;
}

/**
 * The fields of a log line made safe to write, as {@link createConsoleLogger} writes them:
 *
 * - an `Error` (in any field, and whatever is thrown into `err`/`error`/`cause`) becomes
 *   `{ name, message, code, stack, cause }`, causes followed up to 5 deep (an `AggregateError` adds
 *   `errors`); other properties of errors (a driver's `client`, for example) are left out;
 * - values of keys such as `password`, `secret`, `secretKey`, `token`, `authorization`, `apiKey`,
 *   `privateKey`, `credentials`, `cookie` become `"[redacted]"`, and so does the password of a URL
 *   (`postgres://user:[redacted]@host/db`) or of a `password=…` pair inside any text;
 * - instances of classes (clients, pools, sockets) are written as their class name (`"[Client]"`),
 *   buffers as their size, circular references as `"[Circular]"`;
 * - sizes are bounded: strings at 4 KB, 50 items per array or object, 6 levels deep, and a field
 *   whose JSON would exceed 8 KB is summarised.
 *
 * Use it to make another logger as safe, for example in a pino `formatters.log` hook.
 *
 * @example
 * ```ts
 * logSafeFields({ err: new Error("boom"), password: "hunter2" });
 * // { err: { name: "Error", message: "boom", stack: "Error: boom\n    at …" }, password: "[redacted]" }
 * ```
 */
export function logSafeFields(fields: Record<string, unknown>): Record<string, unknown> {
  const safe = safeEntries(fields, new Set(), 0);
  for (const [key, value] of Object.entries(safe)) {
    if (value === null || typeof value !== "object" || ERROR_KEYS.has(key) || isErrorDescription(value))
      continue;
    const length = JSON.stringify(value).length;
    if (length > MAX_FIELD_LENGTH) {
      const size = Array.isArray(value) ? `array of ${value.length}` : `${Object.keys(value).length} keys`;
      safe[key] = `[summarised: ${size}, ${length} characters of JSON]`;
    }
  }
  return safe;
}

/** The fields as JSON; a field that cannot even be read (a throwing getter) does not lose the line. */
function writeFields(fields: Record<string, unknown>): string {
  try {
    return JSON.stringify(logSafeFields(fields));
  } catch (error) {
    return JSON.stringify({ logFieldsUnwritable: redactText(String(error)) });
  }
}

function isErrorDescription(value: object): boolean {
  return "stack" in value && "message" in value && "name" in value;
}

/**
 * How {@link createConsoleLogger} writes a line: `text` for a person at a terminal
 * (`2026-01-02T03:04:05.678Z WARN message {"field":1}`), `json` for a log collector (one JSON object
 * per line: `{"time":"…","level":"warn","msg":"message","field":1}`, pino's field names).
 *
 * @example
 * ```ts
 * const format: LogFormat = process.stderr.isTTY ? "text" : "json";
 * ```
 */
export type LogFormat = "text" | "json";

/**
 * The levels a console logger can be set to: `silent` writes nothing.
 *
 * @example
 * ```ts
 * const level: LogLevel = process.env.CI ? "warn" : "info";
 * ```
 */
export type LogLevel = LogEntry["level"] | "silent";

const LEVEL_ORDER = ["debug", "info", "warn", "error", "silent"] as const;

/**
 * Whether `value` names a {@link LogLevel}.
 *
 * @example
 * ```ts
 * isLogLevel("info"); // true
 * ```
 */
export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === "string" && (LEVEL_ORDER as readonly string[]).includes(value);
}

/**
 * A logger that writes one line per entry to a stream (standard error by default), for CLIs and demos.
 * Fields are made safe by {@link logSafeFields}: errors with their name, message, code, stack and
 * cause; no passwords, keys or client objects. `format` is `text` (the default) or `json`; `level`
 * is the lowest level written (default `info`; `silent` writes nothing).
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "demo", logger: createConsoleLogger({ level: "info" }) });
 * ```
 */
export function createConsoleLogger(
  options: { level?: LogLevel; format?: LogFormat; stream?: { write(text: string): unknown } } = {},
): Logger {
  const minimum = LEVEL_ORDER.indexOf(options.level ?? "info");
  const stream = options.stream ?? process.stderr;
  const json = options.format === "json";
  const make = (bindings: Record<string, unknown>): Logger => {
    const at =
      (level: LogEntry["level"]): LogFunction =>
      (first: Record<string, unknown> | string, message?: string) => {
        if (LEVEL_ORDER.indexOf(level) < minimum) return;
        const fields = typeof first === "string" ? bindings : { ...bindings, ...first };
        const text = redactText(typeof first === "string" ? first : (message ?? ""));
        const time = new Date().toISOString();
        if (json) {
          // time, level and msg first, as pino writes them; a field of the same name cannot replace them.
          const head = { time, level, msg: text };
          const line = writeFields(Object.assign({ ...head }, fields, head));
          stream.write(`${line}\n`);
          return;
        }
        const extra = Object.keys(fields).length > 0 ? ` ${writeFields(fields)}` : "";
        stream.write(`${time} ${level.toUpperCase()} ${text}${extra}\n`);
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
