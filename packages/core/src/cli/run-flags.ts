import { ConfigurationError } from "../errors/onceflow-error.js";
import { isLogLevel, type LogFormat, type LogLevel } from "../observability/logger.js";
import type { RestoreSetting } from "../runtime/restore/restore-plan.js";

/**
 * The flags of `onceflow run` as commander hands them over (strings, unparsed).
 *
 * @example
 * ```ts
 * const flags: RawRunFlags = { subtask: "from-hostname", metricsPort: "9464", metricsHost: "0.0.0.0" };
 * ```
 */
export interface RawRunFlags {
  readonly jobExport?: string;
  readonly subtask?: string;
  readonly threads?: boolean;
  readonly allowNonRestoredState?: boolean;
  readonly threadMaxYoungGeneration?: string;
  readonly threadMaxOldGeneration?: string;
  readonly metricsPort?: string;
  readonly metricsHost?: string;
  readonly readyMaxCheckpointAge?: string;
  readonly uiPort?: string;
  readonly uiHost?: string;
  readonly logLevel?: string;
  readonly logFormat?: string;
  /** False with `--no-default-metrics`. */
  readonly defaultMetrics?: boolean;
  readonly restore?: string;
}

/**
 * The flags of `onceflow run`, checked.
 *
 * @example
 * ```ts
 * const flags = parseRunFlags({ metricsPort: "0" }, process.env); // { metricsPort: 0, metricsHost: "127.0.0.1", … }
 * ```
 */
export interface RunFlags {
  readonly jobExport: string | undefined;
  readonly subtaskIndex: number | undefined;
  /** `--threads`: every subtask in a worker thread of this process. */
  readonly threads: boolean;
  /** `--allow-non-restored-state`: drop checkpointed state that no operator claims, with a warning. */
  readonly allowNonRestoredState: boolean;
  /** `--thread-max-young-generation` / `--thread-max-old-generation`: each thread's heap limits, MiB. */
  readonly threadResourceLimits: {
    readonly maxYoungGenerationSizeMb?: number;
    readonly maxOldGenerationSizeMb?: number;
  };
  readonly metricsPort: number | undefined;
  readonly metricsHost: string;
  readonly readyMaxCheckpointAgeMs: number | undefined;
  readonly uiPort: number | undefined;
  readonly uiHost: string;
  /** `--log-level` (default `ONCEFLOW_LOG_LEVEL`, else `info`). */
  readonly logLevel: LogLevel;
  /** `--log-format`; undefined: `ONCEFLOW_LOG_FORMAT`, else `text` on a terminal and `json` otherwise. */
  readonly logFormat: LogFormat | undefined;
  /** Serve prom-client's `process_*` and `nodejs_*` metrics beside the job's (`--no-default-metrics`: not). */
  readonly defaultMetrics: boolean;
  /** `--restore`: where the job starts (the job's `restore` option), applied once. */
  readonly restore: RestoreSetting | undefined;
}

const MIB = "a whole number of MiB ≥ 1";

/** Where the endpoints and the dashboard listen unless told otherwise: this machine only (`0.0.0.0` in a pod). */
export const DEFAULT_METRICS_HOST = "127.0.0.1";

/**
 * Checks the flags of `onceflow run`; `env` supplies `HOSTNAME` for `--subtask from-hostname`.
 * Throws a `CONFIGURATION` error naming the flag and what to change.
 *
 * @example
 * ```ts
 * parseRunFlags({ subtask: "from-hostname" }, { HOSTNAME: "orders-2" }).subtaskIndex; // 2
 * ```
 */
export function parseRunFlags(raw: RawRunFlags, env: Readonly<Record<string, string | undefined>>): RunFlags {
  const metricsPort =
    raw.metricsPort === undefined ? undefined : parsePort("--metrics-port", raw.metricsPort);
  const uiPort = raw.uiPort === undefined ? undefined : parsePort("--ui-port", raw.uiPort);
  if (raw.readyMaxCheckpointAge !== undefined && metricsPort === undefined) {
    throw new ConfigurationError(
      "--ready-max-checkpoint-age",
      "applies to /readyz, which is served with --metrics-port: add --metrics-port <port>",
    );
  }
  if (raw.threads === true && raw.subtask !== undefined) {
    throw new ConfigurationError(
      "--threads",
      "runs every subtask of the job, each in its own thread, and --subtask runs one: pass only one of them",
    );
  }
  for (const [flag, value] of [
    ["--thread-max-young-generation", raw.threadMaxYoungGeneration],
    ["--thread-max-old-generation", raw.threadMaxOldGeneration],
  ] as const) {
    if (value !== undefined && raw.threads !== true) {
      throw new ConfigurationError(flag, "limits the heap of each subtask's thread: add --threads");
    }
  }
  const logLevel = raw.logLevel ?? env.ONCEFLOW_LOG_LEVEL ?? "info";
  if (!isLogLevel(logLevel)) {
    throw new ConfigurationError(
      raw.logLevel === undefined ? "ONCEFLOW_LOG_LEVEL" : "--log-level",
      `must be debug, info, warn, error or silent, got ${JSON.stringify(logLevel)}`,
    );
  }
  const logFormat = raw.logFormat ?? env.ONCEFLOW_LOG_FORMAT;
  if (logFormat !== undefined && logFormat !== "text" && logFormat !== "json") {
    throw new ConfigurationError(
      raw.logFormat === undefined ? "ONCEFLOW_LOG_FORMAT" : "--log-format",
      `must be text or json, got ${JSON.stringify(logFormat)}`,
    );
  }
  const young = raw.threadMaxYoungGeneration;
  const old = raw.threadMaxOldGeneration;
  return {
    jobExport: raw.jobExport,
    subtaskIndex: raw.subtask === undefined ? undefined : parseSubtask(raw.subtask, env),
    threads: raw.threads === true,
    allowNonRestoredState: raw.allowNonRestoredState === true,
    threadResourceLimits: {
      ...(young === undefined
        ? {}
        : { maxYoungGenerationSizeMb: parseWhole("--thread-max-young-generation", young, 1, MIB) }),
      ...(old === undefined
        ? {}
        : { maxOldGenerationSizeMb: parseWhole("--thread-max-old-generation", old, 1, MIB) }),
    },
    metricsPort,
    metricsHost: raw.metricsHost ?? DEFAULT_METRICS_HOST,
    readyMaxCheckpointAgeMs:
      raw.readyMaxCheckpointAge === undefined
        ? undefined
        : parseWhole("--ready-max-checkpoint-age", raw.readyMaxCheckpointAge, 1),
    uiPort,
    uiHost: raw.uiHost ?? DEFAULT_METRICS_HOST,
    restore: raw.restore === undefined ? undefined : parseRestore(raw.restore),
    logLevel,
    logFormat,
    defaultMetrics: raw.defaultMetrics !== false,
  };
}

/**
 * `--restore`: `latest`, `none`, or a checkpoint id (a whole number ≥ 1).
 *
 * @example
 * ```ts
 * parseRestore("42"); // { checkpointId: 42 }
 * ```
 */
export function parseRestore(value: string): RestoreSetting {
  if (value === "latest" || value === "none") return value;
  return {
    checkpointId: parseWhole("--restore", value, 1, "latest, none or a checkpoint id (a whole number ≥ 1)"),
  };
}

/**
 * `--subtask`: a whole number, or `from-hostname` — the trailing `-<n>` of `HOSTNAME`, which a
 * Kubernetes StatefulSet pod gets (`orders-2` runs subtask 2).
 *
 * @example
 * ```ts
 * parseSubtask("from-hostname", { HOSTNAME: "orders-job-3" }); // 3
 * ```
 */
export function parseSubtask(value: string, env: Readonly<Record<string, string | undefined>>): number {
  if (value === "from-hostname") {
    const hostname = env.HOSTNAME;
    const match = hostname === undefined ? null : /-(\d+)$/.exec(hostname);
    if (match === null) {
      throw new ConfigurationError(
        "--subtask",
        `from-hostname takes the subtask from the trailing -<n> of HOSTNAME (a StatefulSet pod such as orders-2), but HOSTNAME is ${hostname === undefined ? "not set" : JSON.stringify(hostname)}; pass --subtask <n> instead`,
      );
    }
    return Number(match[1]);
  }
  return parseWhole("--subtask", value, 0, "a whole number ≥ 0 or from-hostname");
}

function parsePort(flag: string, value: string): number {
  const port = parseWhole(flag, value, 0, "a port from 0 to 65535 (0 picks a free one)");
  if (port > 65_535) throw new ConfigurationError(flag, `must be a port from 0 to 65535, got ${value}`);
  return port;
}

function parseWhole(
  flag: string,
  value: string,
  minimum: number,
  what = `a whole number ≥ ${minimum}`,
): number {
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(Number.isSafeInteger(parsed) && parsed >= minimum)) {
    throw new ConfigurationError(flag, `must be ${what}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
